"""`negharness fetch`: the files tasks read and the released weights models load, downloaded from
their pinned sources into the data root (or the model cache), checked by SHA-256, resumable.

One idea per module: `sources` (the table), `select` (patterns -> sources), `download` (HTTP with
ranges), `manifest` (hashes of first downloads), `unpack` (archives, only as far as tasks need),
`hub` (Hugging Face files), `manual` (sources no program may fetch), `weights` (released checkpoints),
`hub_models` (open_clip tags and transformers ids, into the Hugging Face cache's layout),
`session` (one fetch command: plan, download, verify, report).
"""
