"""Built-in task plugin: registered through negharness's own entry points, like any third-party one."""

from __future__ import annotations

from negharness.hookspecs import hookimpl
from negharness.registry import Registrar


@hookimpl
def negharness_register_tasks(registry: Registrar) -> None:
    registry.add("shapes_t2v_original", "negharness.tasks.shapes_tasks:ShapesT2VOriginal",
                 "embedded world: text-to-video retrieval, original captions (no download)", family="shapes")
    registry.add("shapes_t2i_original", "negharness.tasks.shapes_tasks:ShapesT2IOriginal",
                 "embedded world: text-to-image retrieval, original captions (no download)", family="shapes")
