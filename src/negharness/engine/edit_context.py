"""The editing protocol's context (NeIn), built by the host for each editing task run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from negharness.contracts.context import PluginSource, RunContext
from negharness.contracts.editing import Editor
from negharness.contracts.errors import MediaError, UserError
from negharness.contracts.hashing import hash_json
from negharness.io.unreadable import UnreadableMedia


def refuse_precision(precision: str) -> None:
    """Editing runs apply no autocast: each editor loads its weights in its own dtype (an ``-M``
    option: instruct_pix2pix's ``-M precision=``), so another ``--precision`` would only be recorded."""
    if precision != "fp32":
        raise UserError(f"--precision {precision}: editing runs apply no autocast; an editor sets its own dtype "
                        f"with its -M options (instruct_pix2pix: -M precision={precision})")


class EditContext(RunContext):
    """The editing protocol's context, peer of `negharness.engine.runner.EvalContext`: the editor under
    test (``ctx.model``), where edits are written (``artifacts``), and other plugins by kind and name
    (``ctx.plugin("detector", name)``). ``editor_key`` stands for everything an edit depends on
    besides its input, instruction and seed: the editor's fingerprint, options, weight files, device.
    An image that cannot be read stops the run, or with ``skip_broken_media`` is counted and named
    (`unreadable`), as the embedding runner does for every other task."""

    def __init__(self, editor: Editor, plugins: PluginSource | None, artifacts: Path, seed: int, device: Any = None,
                 editor_key: str = "", skip_broken_media: bool = False) -> None:
        super().__init__(editor, plugins, seed)
        self.artifacts = artifacts
        self.device = device
        self.editor_key = editor_key
        self.skip_broken_media = skip_broken_media
        # the embedding runner's rule and bookkeeping (`negharness.io.unreadable`), not a copy of them
        self.media_policy = UnreadableMedia(skip_broken_media, self.counters)
        self.broken: dict[str, list[str]] = self.media_policy.skipped  # collection -> files left out (skipped_media)

    def unreadable(self, key: str, name: str, error: MediaError) -> None:
        """A sample whose image ``name`` (of collection ``key``) could not be read: ``error`` stops the
        run, or with --skip-broken-media the sample is left out, counted and named in the record."""
        self.media_policy.unreadable(key, name, error)

    def edit_key(self, image: Any, instruction: str, seed: int) -> str:
        """What one edit is a function of, hashed: the input's pixels, the instruction, the sample's
        seed and the editor. A saved edit is reused only under the same key, never by sample id alone."""
        from negharness.store.content import hash_array  # lazy: numpy; `negharness.api` re-exports this module

        return hash_json({"input": hash_array(image), "instruction": instruction, "seed": seed,
                          "editor": self.editor_key}, 32)
