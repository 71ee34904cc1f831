"""The editing protocol's context (NeIn), built by the host for each editing task run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from negharness.api.context import PluginSource, RunContext
from negharness.api.editing import Editor


class EditContext(RunContext):
    """The editing protocol's context, peer of `negharness.engine.runner.EvalContext`: the editor under
    test (``ctx.model``), where edits are written (``artifacts``), and other plugins by kind and name
    (``ctx.plugin("detector", name)``)."""

    def __init__(self, editor: Editor, plugins: PluginSource | None, artifacts: Path, seed: int, device: Any = None) -> None:
        super().__init__(editor, plugins, seed)
        self.artifacts = artifacts
        self.device = device
        self.broken: dict[str, list[str]] = {}
