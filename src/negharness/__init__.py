"""negharness: a plugin-based benchmark harness for negation understanding in vision-language models.

Importing this package is cheap on purpose: torch, open_clip and the plugins load only when a
model or task is actually used, so `negharness list` and `--help` stay instant.
"""

__version__ = "0.1.0"

# The hook API's major version. A plugin module may set ``NEGHARNESS_HOOK_API = 1`` (the version it
# was written for); the host refuses it, by name, when that differs from this one.
HOOK_API = 1
