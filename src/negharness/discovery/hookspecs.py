"""The hook specifications every negharness plugin implements (pluggy, project name ``negharness``).

Each hook receives a registrar bound to one kind (models, tasks, ...) and to the calling plugin, and
adds named entries to it. A hook must stay cheap: it names a lazy ``"module:attribute"`` target
instead of importing torch-heavy code, so that ``negharness list`` never loads a model. A hook whose
names come from data files (a folder of YAML tasks) says so, ``registry.rests_on(path)``, so that the
plugin index (`negharness.discovery.plugin_index`) sees an edit there; its modules are tracked already.

A third-party package exposes a module with ``@hookimpl`` functions under the entry-point group
``negharness``, exactly as the built-in plugins do in negharness's own pyproject.toml::

    [project.entry-points.negharness]
    my_models = "my_package.negharness_plugin"
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from negharness.discovery.registry import Registrar

PROJECT = "negharness"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def negharness_register_models(registry: "Registrar") -> None:
    """Add retrieval models: ``registry.add(name, "pkg.mod:factory", "one-line description")``.

    The factory takes a `negharness.api.ModelOptions` and returns a `negharness.api.EmbeddingModel`.
    """


@hookspec
def negharness_register_tasks(registry: "Registrar") -> None:
    """Add tasks; the factory takes `negharness.api.TaskOptions` and returns a `negharness.api.Task`.

    The task class declares its family (the leaderboard groups by it); a ``family="..."`` given
    here is checked against it when the task loads.
    """


@hookspec
def negharness_register_trainers(registry: "Registrar") -> None:
    """Add trainers; the factory takes `negharness.api.TrainOptions` and returns the checkpoint path.
    It declares its ``-O`` options with `negharness.api.takes_options` and reads them bound (``opts.values``)."""


@hookspec
def negharness_register_editors(registry: "Registrar") -> None:
    """Add image-editing models (``edit(image, instruction) -> image``) for editing tasks."""


@hookspec
def negharness_register_detectors(registry: "Registrar") -> None:
    """Add object detectors that score object presence for editing tasks."""


@hookspec
def negharness_register_trainsets(registry: "Registrar") -> None:
    """Add training sets, named like tasks (``msrvtt10ktrain``); the factory takes
    `negharness.api.TrainSetOptions` and returns a `negharness.api.TrainingSet`. Trainers reach
    them through the registry only, so a package can add its own data without touching a trainer."""


@hookspec
def negharness_register_query_builders(registry: "Registrar") -> None:
    """Add query builders for ``negharness build-queries --builder NAME``; the factory takes a
    `negharness.api.QueryBuildOptions` and returns a `negharness.api.QueryBuild` (files written)."""


@hookspec
def negharness_register_judges(registry: "Registrar") -> None:
    """Add judges (a vision-language model answering a question about an image) for judged tasks
    (``negharness run --judge NAME -J key=value``). The factory takes a `negharness.api.ModelOptions`
    (declared with `negharness.api.takes_options`) and returns an object with ``describe() -> dict``
    (what names its answers) and ``answer(items) -> list[str]``, ``items`` being (image bytes, prompt)
    pairs (`negharness.engine.judging.Judge`)."""
