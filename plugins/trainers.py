"""Built-in trainer plugin."""

from __future__ import annotations

from negharness.hookspecs import hookimpl
from negharness.registry import Registrar


@hookimpl
def negharness_register_trainers(registry: Registrar) -> None:
    registry.add("shapes_pretrain", "negharness.plugins.shapes_pretrain:train",
                 "train the embedded world's tiny CLIP from scratch (reproduces the bundled weights)")
