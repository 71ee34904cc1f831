"""The commands that run things: `run` (evaluate models on tasks), `train`, `list`, `fetch`. The
reporting commands are in `negharness.cli.reports`; the parser that names them all in `negharness.cli.parser`.

Heavy modules (torch, open_clip) are imported inside the commands that need them, so ``--help``
and ``list`` answer at once.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from negharness.contracts.errors import UserError
from negharness.cli.common import _console, _host, _pairs, _progress
from negharness.cli.training_free import print_training_free, refuse_training_free, training_free
from negharness.cli.process import (
    LogProgress,
    PluginRunError,
    debug_requested,
    os_error_in,
    torchrun_argv,
)
from negharness.engine.ranks import from_env

if TYPE_CHECKING:  # imported where used: start-up time
    from negharness.engine.request import RunOutcome


LIST_KINDS = ("model", "task", "trainer", "trainset", "editor", "detector", "query_builder", "judge")


def listed(names: list[str], pattern: str | None) -> list[str]:
    """The names `negharness list PATTERN` shows: a glob matches whole names, plain text any part of one."""
    import fnmatch

    from negharness.discovery.registry import is_glob  # lazy: start-up time

    if not pattern:
        return names
    if is_glob(pattern):
        return [n for n in names if fnmatch.fnmatchcase(n, pattern)]
    return [n for n in names if pattern.lower() in n.lower()]


def cmd_list(args: argparse.Namespace) -> int:
    host = _host(args)
    console = _console()
    pattern, shown = getattr(args, "pattern", None), 0
    for kind in ([args.kind] if getattr(args, "kind", None) else LIST_KINDS):
        keep = set(listed([e.name for e in host.registry.entries(kind)], pattern))
        entries = [e for e in host.registry.entries(kind) if e.name in keep]
        # beside the trainers, the methods that need none (`negharness.cli.training_free`)
        free = training_free(host.registry, listed(host.registry.names("model"), pattern)) if kind == "trainer" else []
        if not entries and not free:
            continue
        shown += len(entries) + len(free)
        clashes = host.registry.duplicates(kind)
        flag = OPTION_FLAGS.get(kind) if not args.brief else None
        if entries and console.is_terminal:
            _print_table(console, kind, entries, flag, clashes)
        elif entries:  # a pipe or a file: one plain line an entry, never cut at a width
            _print_plain(console, kind, entries, flag, clashes)
        print_training_free(console, free)
        if kind == "model":
            from negharness.fetch.weights import listing  # lazy: start-up time

            if line := listing([e.name for e in entries]):
                console.print(line, markup=False, highlight=False, soft_wrap=True)
        if kind == "task":
            from negharness.fetch.select import benchmark_sizes  # lazy: start-up time

            console.print(benchmark_sizes([e.name for e in entries]), markup=False, highlight=False, soft_wrap=True)
        for name, plugins in clashes.items():
            console.print(f"{kind} {name!r} is registered by {' and '.join(map(repr, plugins))}: commands that use "
                          f"it fail until all but one are blocked, e.g. -p no:{plugins[-1]}", markup=False)
    for info in sorted(host.plugins.values(), key=lambda p: p.name):
        if info.status != "loaded":
            console.print(f"plugin {info.name}: {info.status}" + (f" ({info.error})" if info.error else ""))
    kind = getattr(args, "kind", None)
    if (pattern or kind) and not shown:
        what = f"no {kind or 'entry'} matches {pattern!r}" if pattern else f"no {kind} is registered"
        raise UserError(f"{what}; `negharness list` shows them all")
    return 0


def _print_table(console: Any, kind: str, entries: list[Any], flag: str | None, clashes: Any) -> None:
    """A kind's entries for a terminal: a table whose every column folds, never cuts (a name, a plugin
    and an option are what a user types next)."""
    from rich.table import Table

    table = Table(title=f"{kind}s", title_justify="left")
    table.add_column("name", style="cyan", overflow="fold", min_width=12)
    table.add_column("plugin", overflow="fold")
    table.add_column("description", overflow="fold")
    if flag:
        table.add_column(f"{flag} options", overflow="fold", min_width=24)
    for e in entries:
        row = [e.name + (" (duplicate)" if e.name in clashes else ""), e.plugin, e.description]
        table.add_row(*row, *([_options_cell(e, flag)] if flag else []))
    console.print(table)


def _print_plain(console: Any, kind: str, entries: list[Any], flag: str | None, clashes: Any) -> None:
    """A kind's entries for a pipe: a heading, then name, plugin, description and options, tab-separated,
    one line each (grep and cut read them; nothing folds or cuts)."""
    lines = [f"# {kind}s: name, plugin, description" + (f", {flag} options" if flag else "") + " (tab-separated)"]
    for e in entries:
        cells = [e.name + (" (duplicate)" if e.name in clashes else ""), e.plugin, e.description]
        cells += [_options_cell(e, flag)] if flag else []
        lines.append("\t".join("; ".join(" ".join(ln.split()) for ln in str(c).splitlines() if ln.strip())
                                for c in cells))
    print("\n".join(lines), file=console.file)  # plain: Rich would expand the tabs


OPTION_FLAGS = {"model": "-M", "editor": "-M", "detector": "-M", "task": "-T", "trainer": "-O", "trainset": "-T",
                "judge": "-J"}


def _options_cell(entry: Any, flag: str) -> str:
    """The options an entry declares, one per line (from the declaration its registration names, else
    from its factory: its module loaded, not its weights)."""
    from negharness.contracts.options import (  # lazy: start-up time
        declared_options,
        describe_options,
    )

    try:
        specs = declared_options(entry.declared())
    except Exception as exc:  # a broken plugin still lists; the cell says why
        return f"(cannot load: {str(exc).splitlines()[0][:60]})"
    if specs is None:
        return "(see its description)"
    return describe_options(specs) or "none"  # each option with its meaning


def cmd_run(args: argparse.Namespace) -> int:
    from negharness.cli.heartbeat import heartbeat  # lazy: start-up time
    from negharness.engine.request import RunRequest  # lazy: start-up time

    shared, models = _models_in_order(args)
    req = RunRequest(
        model=models[0][0], tasks=args.task, model_options=shared,
        task_extra=_pairs(args.task_arg, "-T"), data_root=args.data_root, device=args.device,
        precision=args.precision, batch_size=args.batch_size, workers=args.workers, limit=args.limit,
        seed=args.seed, output_dir=args.output_dir, log_samples=args.log_samples, overwrite=args.overwrite,
        cache_dir=args.cache_dir, use_cache=not args.no_cache, skip_broken_media=args.skip_broken_media,
        judge=args.judge, judge_options=_pairs(args.judge_arg, "-J"))
    err = _console(stderr=True)
    say = err.is_terminal and not from_env().active  # the plan, in a terminal (a log gets the progress lines)
    host = _host(args)
    clock = _clock(args)
    follower = not from_env().main  # a torchrun rank other than 0 says nothing of its own
    with heartbeat(clock, (lambda line: None) if follower else lambda line: err.print(line, markup=False,
                                                                                          highlight=False)):
        return _plan_and_run(args, req, models, host, clock, err, say)


def _plan_and_run(args: argparse.Namespace, req: Any, models: list[tuple[str, Any]], host: Any, clock: Any,
                  err: Any, say: bool) -> int:
    """Every model planned (every refusal said before torch), then each run or answered from its records."""
    from negharness.engine.fingerprints import standing  # lazy: start-up time
    from negharness.engine.plan import distinct_models, model_requests, plan_lines, planned  # lazy: start-up time
    from negharness.engine.request import plan_head  # lazy: start-up time

    made = []
    for one in model_requests(host, req, models):  # every model planned (every refusal told) before torch loads
        if say:
            err.print(plan_head(one), markup=False)
        own = clock.fork()  # this model's stages; the process's start-up is every model's
        with _plugin_blamed(one.model, args, host):  # a task plugin's bug in building its task
            plan, hasher = planned(host, one, own)
        made.append((plan, hasher, own))
        if say:
            for line in plan_lines(plan):
                err.print(line, markup=False)
    distinct_models([plan for plan, _, _ in made])
    results = []
    for plan, hasher, own in made:  # in order, one at a time, sharing the caches
        outcomes = standing(host, plan)  # every record stands: answered from them, no torch
        if outcomes is None:
            if say:
                err.print(f"loading torch, the tasks and model {plan.model} ...", markup=False)
            outcomes = _evaluate(args, host, plan, hasher, err, own)
        if outcomes is None:  # a torchrun rank that prints nothing
            return 0
        results.append((plan.model_cfg.label, outcomes))
    if len(results) == 1:
        _print_run_summary(results[0][1])
    else:
        _print_models_summary(results)
    # some tasks failed alone (their input unusable), the others' records are written: exit 2, as for bad input
    return 2 if any(o.error for _, outcomes in results for o in outcomes) else 0


def _models_in_order(args: argparse.Namespace) -> tuple[Any, list[tuple[str, Any]]]:
    """(the model options written before the first --model, [(each --model, the options written after
    it)]): the order `InOrder` kept. A model option given twice for one model is refused."""
    from negharness.contracts.model_options import ModelOptions  # lazy: start-up time

    groups: list[tuple[str | None, dict[str, Any]]] = [(None, {})]
    for dest, value in getattr(args, "model_order", None) or []:
        if dest == "model":
            groups.append((value, {}))
        elif dest == "model_arg":
            groups[-1][1].setdefault("model_arg", []).append(value)
        else:
            if dest in groups[-1][1]:
                who = f"--model {groups[-1][0]}" if groups[-1][0] else "every model"
                raise UserError(f"--{dest} given twice for {who}: give it once")
            groups[-1][1][dest] = value

    def options(given: dict[str, Any]) -> Any:
        return ModelOptions(given.get("arch"), given.get("pretrained"), given.get("checkpoint"),
                            _pairs(given.get("model_arg"), "-M"))

    return options(groups[0][1]), [(str(name), options(given)) for name, given in groups[1:]]


def _clock(args: argparse.Namespace) -> Any:
    """The run's stage clock, started with the process: start-up, then the CLI ready to now (the host)."""
    from negharness.engine.stages import StageClock  # lazy: start-up time

    clock = StageClock(getattr(args, "started_at", None))
    ready = getattr(args, "ready_at", None)
    if clock.started_at is not None and ready is not None:
        clock.add("startup", ready - clock.started_at)
        clock.add("plan", time.perf_counter() - ready)
    return clock


def _evaluate(args: argparse.Namespace, host: Any, plan: Any, hasher: Any, err: Any, clock: Any) -> list[Any] | None:
    """The run the normal way (torch, the model, on the plan made before torch); None on a torchrun
    rank that prints nothing."""
    with clock.timed("torch_import"):
        from negharness.engine.evaluate import execute  # lazy: start-up time (torch)
    from negharness.engine.sharding import (  # lazy: start-up time
        quiet_stderr_for_followers,
        shard_session,
    )

    with shard_session(plan) as shards:  # None unless started by torchrun
        quiet_stderr_for_followers(shards)
        with _progress(err) as progress:
            with _plugin_blamed(plan.model, args, host):
                outcomes = execute(host, plan, progress if shards is None or shards.writes else None, shards,
                                   clock, hasher)
    return outcomes if shards is None or shards.writes else None


@contextlib.contextmanager
def _plugin_blamed(model: str, args: argparse.Namespace, host: Any) -> Iterator[None]:
    """A bug raised inside a plugin (not the user's input, not the machine) becomes one line naming the
    plugin whose code raised it, before torch (a task built, its files named) as after."""
    try:
        yield
    except (UserError, OSError, KeyboardInterrupt):
        raise
    except Exception as exc:
        from negharness.engine.failures import blame_run  # lazy: start-up time

        if debug_requested() or os_error_in(exc) is not None:  # the machine's failure (a full disk)
            raise
        raise PluginRunError(blame_run(exc, host, model, args.output_dir)) from exc


def _print_run_summary(outcomes: list[Any]) -> None:
    """One row per task, one line per score and per count, so the table reads at 80 columns; the
    model is named once in the title (one run, one model)."""
    from rich.table import Table

    labels = sorted({o.record.get("model", {}).get("label", "?") for o in outcomes if o.record is not None})
    table = Table(title=f"negharness run: {', '.join(labels)}", title_justify="left")
    table.add_column("task")  # a rerun's reason may wrap; names and numbers never do
    table.add_column("scores", no_wrap=True)
    table.add_column("items", justify="right", no_wrap=True)
    for o in outcomes:
        rec = o.record or {}
        items = "\n".join(f"{v} {k.replace('_', ' ')}" for k, v in rec.get("n_items", {}).items())
        table.add_row(_task_cell(o, rec), "\n".join(_score_lines(rec)), items)
    _console().print(table)
    _print_notes(outcomes)


def _score_lines(rec: dict[str, Any]) -> list[str]:
    """A record's leaderboard scores, one line each, in the format its task declares."""
    info = rec.get("metric_info", {})
    names = rec.get("task", {}).get("leaderboard_metrics") or list(rec.get("metrics", {}))
    return [f"{k} {format(rec['metrics'][k], info.get(k, {}).get('fmt', '.3f'))}"
            for k in names if k in rec.get("metrics", {})]


def _print_notes(outcomes: list[Any]) -> None:
    """Under a run's table: media left out, tasks that failed alone, where the records are."""
    console = _console()
    for o in outcomes:
        rec = o.record or {}
        if rec.get("n_skipped_media"):
            first = [i for ids in rec.get("skipped_media", {}).values() for i in ids]
            console.print(f"{o.task}: {rec['n_skipped_media']} unreadable media left out of scoring "
                          f"(--skip-broken-media), e.g. {', '.join(first[:3])}", markup=False)
    for o in outcomes:
        if o.error:
            _console(stderr=True).print(f"error: task {o.task} failed (the other tasks ran): {o.error}",
                                        markup=False, highlight=False, soft_wrap=True)
    folders = sorted({str(o.path.parent) for o in outcomes if o.record is not None})
    console.print(f"records in {', '.join(folders)}; `negharness leaderboard` builds the leaderboard"
                  + ("; --overwrite reruns cached records" if any(o.skipped for o in outcomes) else ""))


def _print_models_summary(results: list[tuple[str, list[Any]]]) -> None:
    """Several models side by side: one row a task, one column a model (its scores, or why it has none);
    then each model's own notes as a one-model run prints them."""
    from rich.table import Table

    table = Table(title=f"negharness run: {len(results)} models", title_justify="left")
    table.add_column("task", no_wrap=True)
    for label, _ in results:
        table.add_column(label, overflow="fold")
    tasks = list(dict.fromkeys(o.task for _, outcomes in results for o in outcomes))
    for task in tasks:
        cells = []
        for _, outcomes in results:
            o = next((x for x in outcomes if x.task == task), None)
            cells.append("" if o is None else _scores_cell(o))
        table.add_row(task, *cells)
    _console().print(table)
    _print_notes([o for _, outcomes in results for o in outcomes])


def _scores_cell(outcome: Any) -> str:
    """The leaderboard scores of one record, one line each, and (cached) or why it reran or failed."""
    lines = _score_lines(outcome.record or {})
    state = "failed: see below" if outcome.error else "cached" if outcome.skipped else \
        (f"rerun: {outcome.reason}" if outcome.reason else "")
    return "\n".join(lines + ([f"({state})"] if state else []))


def _task_cell(outcome: RunOutcome, rec: dict[str, Any]) -> str:
    """The task, its variant (a --limit or -T run) and whether it was reused or why it reran: plain text,
    printed by a console that parses no markup (`_console`), so "[limit=2]" stays as written."""
    text = outcome.task + (f" [{rec['variant_label']}]" if rec.get("variant_label") else "")
    if outcome.error:
        text += " (failed: see below)"
    elif outcome.skipped:
        text += " (cached)"
    elif outcome.reason:
        text += f" (rerun: {outcome.reason})"
    return text


def cmd_train(args: argparse.Namespace) -> int:
    from negharness.contracts.model import ModelOptions  # lazy: start-up time
    from negharness.contracts.training import TrainOptions  # lazy: start-up time
    from negharness.discovery.lookup import PluginLookup  # lazy: start-up time
    from negharness.engine.precheck import check_train_request  # lazy: start-up time

    if args.nproc and args.nproc > 1:  # re-launch this command under torchrun, one process per rank
        import subprocess

        return subprocess.call(torchrun_argv(args.nproc, sys.argv[1:] if args.argv is None else args.argv))
    host = _host(args)
    refuse_training_free(host.registry, args.trainer)  # `--trainer steer`: nothing to train; says how to run it
    host.registry.get("trainer", args.trainer)
    if args.model:
        host.registry.get("model", args.model)
    err = _console(stderr=True)
    log = None if err.is_terminal else (lambda line: err.print(line, soft_wrap=True))
    cache_dir = Path(args.cache_dir) if args.cache_dir else None
    with _progress(err, training=True) as progress:
        opts = TrainOptions(
            out=Path(args.out), model=args.model,
            model_options=ModelOptions(args.arch, args.pretrained, args.checkpoint, _pairs(args.model_arg, "-M")),
            task=args.task, task_extra=_pairs(args.task_arg, "-T"), seed=args.seed, device=args.device,
            cache_dir=cache_dir, data_root=Path(args.data_root) if args.data_root else None,
            extra=_pairs(args.option, "-O"), progress=progress,
            plugins=PluginLookup(host.registry, cache_dir=cache_dir),
            max_steps=args.max_steps, limit=args.limit, workers=args.workers, log=log,
            precision=args.precision, batch_size=args.batch_size)
        check_train_request(host.registry, args.trainer, opts)  # -O, -M and -T, before torch
        path = host.registry.create("trainer", args.trainer, opts)  # -O bound to what the trainer declares
    if from_env().main:
        _console().print(f"wrote {path}")
    return 0


def cmd_fetch(args: argparse.Namespace) -> int:
    """`negharness fetch`: the sources the patterns name, into the data root (exit 1 while some wait
    for a person: their steps are printed)."""
    from negharness.fetch import hub_models, session  # lazy: start-up time
    from negharness.fetch.select import download_size, plan  # lazy: start-up time
    from negharness.fetch.sources import (  # lazy: start-up time
        SOURCES,
        human_size,
        read_sources,
    )
    from negharness.io.paths import cache_root, data_root  # lazy: start-up time

    sources = read_sources(args.sources) if args.sources else SOURCES
    if not args.pattern and not args.list:
        raise UserError("negharness fetch: name a task, glob or benchmark (e.g. 'sugarcrepe_*', negbench), "
                        "or --list the sources")
    hub_needs = hub_models.named_in(args.pattern, args.arch, args.pretrained)  # into the Hugging Face cache
    rest = [p for p in args.pattern if p not in hub_models.FETCHABLE]
    host = _host(args)
    names = [e.name for kind in ("task", "trainset") for e in host.registry.entries(kind)]
    chosen, models = plan(rest, names, sources) if rest or not hub_needs else ([], [])  # data root; model cache
    root, _ = data_root(args.data_root)
    places = [(where, group) for where, group in ((root, chosen), (cache_root(args.cache_dir), models)) if group]
    console, err = _console(), _console(stderr=True)
    if args.list:
        for need in hub_needs:
            for line in hub_models.plan_lines(need):
                console.print(line, markup=False, highlight=False, soft_wrap=True)
        for where, group in places:
            for s in group:
                check = "by hand" if s.kind == "manual" else session.pin_kind(s)
                state = "in place" if session.in_place(s, where) else "missing"
                console.print(f"{s.name}  {s.kind}  {human_size(s.size)}  {check}  {state}  {s.url or '-'}",
                              markup=False, highlight=False, soft_wrap=True)
            console.print(f"{'data root' if where == root else 'model cache'} {where}; download "
                          f"{download_size(group)}", markup=False, highlight=False)
        return 0
    root.mkdir(parents=True, exist_ok=True)
    if err.is_terminal:
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        bar: Any = Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                            TimeRemainingColumn(), console=err, transient=True)
    else:
        bar = LogProgress(sys.stderr)
    def log(line: str) -> None:
        err.print(line, markup=False, highlight=False)

    with bar:
        outcomes = [o for where, group in places for o in session.fetch_sources(group, where, args.jobs, bar, log)]
        outcomes += [o for need in hub_needs for o in hub_models.fetch(need, args.jobs, bar, log)]
    waiting = [o for o in outcomes if o.state == "by hand"]
    for o in outcomes:
        line = f"{o.source.name}: {o.state}" + (f" ({o.note})" if o.note and o.state != "by hand" else "")
        console.print(line, markup=False, highlight=False)
    for o in waiting:
        console.print(f"\n{o.source.name}: by hand: {o.note}\nthen run this command again to check it.",
                      markup=False, highlight=False, soft_wrap=True)
    return 1 if waiting else 0
