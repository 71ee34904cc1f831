"""Built-in model plugin: registered through negharness's own entry points, like any third-party one."""

from __future__ import annotations

from negharness.hookspecs import hookimpl
from negharness.registry import Registrar


@hookimpl
def negharness_register_models(registry: Registrar) -> None:
    registry.add("clip", "negharness.plugins.openclip_model:clip",
                 "open_clip CLIP: ViT-B-32/openai by default; --arch, --pretrained or --checkpoint")
    registry.add("shapes_clip", "negharness.plugins.shapes_clip:shapes_clip",
                 "tiny CLIP trained on the embedded world (bundled weights, no download)")
