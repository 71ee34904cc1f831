"""The ground floor: what every room of the host and every plugin agree on, importing no room.

The contracts a plugin implements (`task.Task`, `model.EmbeddingModel`, `editing.Editor`, training
sets), the context a task receives, the media it hands over (`media_set`), a model's tensor
preprocessing (`pixel_transform`), options, errors, names, hashes, precision and frame sampling.
Host rooms import these modules; plugins import the same names from the face on top,
`negharness.api`, which re-exports them (as `pytest` re-exports `_pytest`). Nothing here imports
torch or numpy at module level, so the face stays quick to import.
"""
