"""negharness: a plugin-based benchmark harness for negation understanding in vision-language models.

Importing this package is cheap on purpose: torch, open_clip and the plugins load only when a
model or task is actually used, so `negharness list` and `--help` stay instant.
"""

from typing import TYPE_CHECKING

from negharness.version import HOOK_API, __version__

if TYPE_CHECKING:
    from negharness.engine.request import RunOutcome

__all__ = ["HOOK_API", "__version__", "run"]


def run(model: "str | list[str]", tasks: "str | list[str]", *, arch: "str | None" = None, pretrained: "str | None" = None,
        checkpoint: "str | None" = None, model_args: "dict[str, str] | None" = None,
        task_args: "dict[str, str] | None" = None, **settings: object) -> "list[RunOutcome]":
    """``negharness run`` as a library call: the same plugins, checks, embedding cache, reuse and
    records as the command, returned as `negharness.engine.evaluate.RunOutcome` objects (task,
    record path, the record, whether it was reused). ``settings`` are the run's other options by
    their `RunRequest` names (``device``, ``precision``, ``batch_size``, ``limit``, ``seed``,
    ``output_dir``, ``overwrite``, ...); an unknown one is an error naming it. As with the command,
    a task whose own input proves unusable fails alone: its outcome has ``error`` set and no record,
    the others run; when every task fails, the call raises one error naming each. ``model`` may be a
    list: each model runs in order on the tasks, sharing the caches (every one planned, and so every
    refusal said, before the first runs); the options given go to every model that takes them, as
    those written before the first ``--model`` do on the command line."""
    from negharness.engine.library import run_library  # lazy: `import negharness` stays free of torch

    return run_library([model] if isinstance(model, str) else list(model),
                       [tasks] if isinstance(tasks, str) else list(tasks), arch, pretrained, checkpoint,
                       dict(model_args or {}), dict(task_args or {}), settings)
