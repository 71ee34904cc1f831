"""`negharness.run`, the library door: the requests the CLI would build, each planned the CLI's way
(`negharness.engine.plan.planned`) before torch is imported, so a mistake costs what it costs the command
(a typo in ``model_args`` is told in about a second, not after torch's import); then run in order
(`negharness.engine.evaluate.run_evaluation`, whose module imports torch)."""

from __future__ import annotations

import dataclasses
from typing import Any

from negharness.contracts.errors import UserError
from negharness.contracts.model_options import ModelOptions
from negharness.discovery.manager import make_host
from negharness.engine.plan import distinct_models, model_requests, planned
from negharness.engine.request import RunOutcome, RunRequest
from negharness.engine.stages import StageClock


def run_library(models: list[str], tasks: list[str], arch: str | None, pretrained: str | None,
                checkpoint: str | None, model_args: dict[str, str], task_args: dict[str, str],
                settings: dict[str, Any]) -> list[RunOutcome]:
    """`negharness.run`: the requests the CLI would build (one a model, the options given apply to every
    model that takes them: `model_requests`), on the host the CLI would make, each planned the CLI's way
    (`planned`: the same refusals, folders and verdicts) before any runs and before torch, then run in order."""
    known = {f.name for f in dataclasses.fields(RunRequest)} - {"model", "tasks", "model_options", "task_extra"}
    unknown = sorted(set(settings) - known)
    if unknown:
        raise UserError(f"negharness.run: unknown setting {unknown[0]!r} (settings: {', '.join(sorted(known))})")
    if not models:
        raise UserError("negharness.run: name at least one model")
    shared = RunRequest(models[0], tasks, ModelOptions(arch, pretrained, checkpoint, model_args), task_args, **settings)
    host = make_host(cache_dir=shared.cache_dir)  # the plugin index under the run's own cache root
    requests = model_requests(host, shared, [(m, ModelOptions()) for m in models])
    clocks = [StageClock() for _ in requests]  # each model's records time its own stages
    made = []
    for req, clock in zip(requests, clocks):  # every refusal before any run
        made.append(planned(host, req, clock))
    distinct_models([plan for plan, _ in made])
    from negharness.engine.evaluate import run_evaluation  # lazy: torch, once every request is planned

    return [o for (plan, hasher), clock in zip(made, clocks) for o in run_evaluation(host, plan, None, None, clock,
                                                                                     hasher)]
