"""What a user asks of `negharness run` (a `RunRequest`, raw, as the CLI or `negharness.run()` received it)
and what they get back (one `RunOutcome` per task). Nothing here decides anything: the request is planned
once (`negharness.engine.plan.make_plan`), and every door reads the plan, never the request again."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from negharness.contracts.errors import UserError
from negharness.contracts.model_options import ModelOptions
from negharness.discovery.registry import Entry


@dataclass
class RunRequest:
    model: str
    tasks: list[str]
    model_options: ModelOptions = field(default_factory=ModelOptions)
    task_extra: dict[str, str] = field(default_factory=dict)
    data_root: str | None = None
    device: str = "auto"
    precision: str = "fp32"
    batch_size: int = 64
    workers: int | None = None
    limit: int | None = None
    seed: int = 0
    output_dir: str = "results"
    log_samples: bool = False
    overwrite: bool = False
    cache_dir: str | None = None
    use_cache: bool = True
    skip_broken_media: bool = False
    judge: str | None = None  # the judge of judged tasks (`--judge`), and its `-J` options
    judge_options: dict[str, str] = field(default_factory=dict)


@dataclass
class RunOutcome:
    task: str
    path: Path
    record: dict[str, Any] | None
    skipped: bool = False  # an existing record was reused
    reason: str | None = None  # why an existing record was not reused (None: first run or reused)
    error: str | None = None  # why the task failed alone (its input unusable: the error's message); record None


def with_failures(outcomes: list[RunOutcome], failed: dict[str, tuple[Path, UserError]]) -> list[RunOutcome]:
    """The outcomes, with the tasks that failed alone: each an outcome with its error and no record;
    when no task stands, the run fails as one error, as a one-task run always did."""
    if failed and not outcomes:
        if len(failed) == 1:
            raise next(iter(failed.values()))[1]
        raise UserError(f"all {len(failed)} tasks failed: {', '.join(failed)}\n"  # each whole, as one alone is
                        + "\n".join(f"{name}: {str(exc) or type(exc).__name__}" for name, (_, exc) in failed.items()))
    return outcomes + [RunOutcome(name, path, None, error=str(exc) or type(exc).__name__)
                       for name, (path, exc) in failed.items()]


def task_entries(host: Any, patterns: list[str]) -> list[Entry]:
    """The registry entries the ``--task`` patterns match, each once, in the order first matched."""
    seen: dict[str, Entry] = {}
    for pattern in patterns:
        try:
            matched = host.registry.match("task", pattern)
        except UserError as exc:
            if "," not in pattern:
                raise
            each = " ".join(f"--task {p.strip()}" for p in pattern.split(",") if p.strip())
            raise UserError(f"{exc}; for several tasks, repeat --task: {each}") from None
        for entry in matched:
            seen.setdefault(entry.name, entry)
    return list(seen.values())


def memo_path(root: Path) -> Path | None:
    """The file-hash memo beside the embedding cache (None when that folder cannot be made)."""
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return root / "content-hashes"  # shared with the embedding cache's media hashes


def plan_head(req: RunRequest) -> str:
    """The request as given, said at once (before the plugin host loads)."""
    return (f"negharness run: model {req.model}, task {' '.join(req.tasks)}; device {req.device}, "
            f"precision {req.precision}, batch size {req.batch_size}")
