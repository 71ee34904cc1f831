"""The `negharness` command: the parser, `main`, and the commands that run things (run, train, list);
the reporting commands are in `cli_reports`.

Heavy modules (torch, open_clip) are imported inside the commands that need them, so ``--help``
and ``list`` answer at once. A `UserError` becomes one red line and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Any, Sequence

from negharness.version import __version__
from negharness.cli.common import _console, _host, _pairs, _progress
from negharness.cli.process import (
    LogProgress,
    PluginRunError,
    debug_requested,
    exit_now,
    from_env,
    one_line,
    os_error_in,
    prefer_passive_waiting,
    rank_label,
    torchrun_argv,
)
from negharness.cli.reports import (
    cmd_build_queries,
    cmd_compare,
    cmd_diagnose,
    cmd_export,
    cmd_fire,
    cmd_leaderboard,
)
from negharness.api.errors import UserError
from negharness.api.options import check_env_flags, env_flag

EXAMPLES = """examples:
  negharness run --model shapes_clip --task 'shapes_*'        # embedded default, no download
  negharness run --model clip --task 'negbench_*' --device cuda --precision bf16
  negharness run --model clip --arch ViT-B-32 --checkpoint negclip.pt -M quick_gelu=true --task msrvtt3k_composed
  negharness run --model clip --task 'sugarcrepe_*' --task valse_existence
  negharness run --model clip --include-path my_tasks/ --task my_choice_task
  negharness leaderboard                                      # results/ -> results/README.md
  negharness list
  negharness fetch 'sugarcrepe_*'                             # the files those tasks read, into the data root
"""


# commands ------------------------------------------------------------------------------------------
def cmd_list(args: argparse.Namespace) -> int:
    from rich.table import Table

    host = _host(args)
    console = _console()
    for kind in ("model", "task", "trainer", "trainset", "editor", "detector", "query_builder"):
        entries = host.registry.entries(kind)
        if not entries:
            continue
        table = Table(title=f"{kind}s", title_justify="left")
        table.add_column("name", style="cyan", no_wrap=True, min_width=12)
        table.add_column("plugin")
        table.add_column("description")
        flag = OPTION_FLAGS.get(kind)
        if flag and not args.brief:
            table.add_column(f"{flag} options")
        clashes = host.registry.duplicates(kind)
        for e in entries:
            row = [e.name + (" (duplicate)" if e.name in clashes else ""), e.plugin, e.description]
            table.add_row(*row, *([_options_cell(e, flag)] if flag and not args.brief else []))
        console.print(table)
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
    return 0


OPTION_FLAGS = {"model": "-M", "editor": "-M", "detector": "-M", "task": "-T", "trainer": "-O"}


def _options_cell(entry: Any, flag: str) -> str:
    """The options an entry declares, one per line (loads its module, not its weights)."""
    from negharness.api.options import (  # lazy: start-up time
        declared_options,
        describe_options,
    )

    try:
        specs = declared_options(entry.load())
    except Exception as exc:  # a broken plugin still lists; the cell says why
        return f"(cannot load: {str(exc).splitlines()[0][:60]})"
    if specs is None:
        return "(see its description)"
    return describe_options(specs, with_help=False) or "none"


def _check_counts(args: argparse.Namespace) -> None:
    """Numbers that argparse types as int but that make no sense below a bound."""
    if args.limit is not None and args.limit < 1:
        raise UserError(f"--limit {args.limit}: must be at least 1 (leave --limit out to use every item)")
    if args.workers is not None and args.workers < 0:
        raise UserError(f"--workers {args.workers}: must be 0 (decode in this process) or more")


def _check_cache_dir(explicit: str | None) -> None:
    """The cache folder must be a folder we can write, found out before a model loads."""
    import os

    from negharness.io.paths import cache_root, writable_folder  # lazy: start-up time

    option = "--cache-dir" if explicit else ("$NEGHARNESS_CACHE" if os.environ.get("NEGHARNESS_CACHE") else "cache folder")
    writable_folder(cache_root(explicit), option)


def cmd_run(args: argparse.Namespace) -> int:
    from negharness.api.model_options import ModelOptions  # lazy: start-up time
    from negharness.engine.plan import (  # lazy: start-up time
        RunRequest,
        answer_from_receipt,
        plan_head,
        plan_lines,
    )

    _check_counts(args)
    if not args.no_cache:
        _check_cache_dir(args.cache_dir)
    req = RunRequest(
        model=args.model, tasks=args.task,
        model_options=ModelOptions(args.arch, args.pretrained, args.checkpoint, _pairs(args.model_arg, "-M")),
        task_extra=_pairs(args.task_arg, "-T"), data_root=args.data_root, device=args.device,
        precision=args.precision, batch_size=args.batch_size, workers=args.workers, limit=args.limit,
        seed=args.seed, output_dir=args.output_dir, log_samples=args.log_samples, overwrite=args.overwrite,
        cache_dir=args.cache_dir, use_cache=not args.no_cache, skip_broken_media=args.skip_broken_media)
    err = _console(stderr=True)
    say = err.is_terminal and not from_env().active  # the plan, in a terminal (a log gets the progress lines)
    if say:
        err.print(plan_head(req), markup=False)
    host = _host(args)
    if say:
        for line in plan_lines(host, req):
            err.print(line, markup=False)
    outcomes = answer_from_receipt(host, req)  # every record stands, said by the run that made them: no torch
    if outcomes is None:
        if say:
            err.print(f"loading torch, the tasks and model {args.model} ...", markup=False)
        outcomes = _evaluate(args, host, req, err)
    if outcomes is not None:
        _print_run_summary(outcomes)
    return 0


def _evaluate(args: argparse.Namespace, host: Any, req: Any, err: Any) -> list[Any] | None:
    """The run the normal way (torch, the tasks, the model); None on a torchrun rank that prints nothing."""
    from negharness.engine.evaluate import run_evaluation  # lazy: start-up time
    from negharness.engine.sharding import (  # lazy: start-up time
        quiet_stderr_for_followers,
        shard_session,
    )

    with shard_session(req) as shards:  # None unless started by torchrun
        quiet_stderr_for_followers(shards)
        with _progress(err) as progress:
            try:
                outcomes = run_evaluation(host, req, progress if shards is None or shards.writes else None, shards)
            except (UserError, OSError, KeyboardInterrupt):
                raise
            except Exception as exc:
                from negharness.engine.failures import blame_run  # lazy: start-up time

                if debug_requested() or os_error_in(exc) is not None:  # the machine's failure (a full disk)
                    raise
                raise PluginRunError(blame_run(exc, host, args.model, args.output_dir)) from exc
    return outcomes if shards is None or shards.writes else None


def _print_run_summary(outcomes: list[Any]) -> None:
    """One row per task, one line per score and per count, so the table reads at 80 columns; the
    model is named once in the title (one run, one model)."""
    from rich.table import Table

    console = _console()
    labels = sorted({(o.record or {}).get("model", {}).get("label", "?") for o in outcomes})
    table = Table(title=f"negharness run: {', '.join(labels)}", title_justify="left")
    table.add_column("task")  # a rerun's reason may wrap; names and numbers never do
    table.add_column("scores", no_wrap=True)
    table.add_column("items", justify="right", no_wrap=True)
    for o in outcomes:
        rec = o.record or {}
        info = rec.get("metric_info", {})
        names = rec.get("task", {}).get("leaderboard_metrics") or list(rec.get("metrics", {}))
        scores = "\n".join(f"{k} {format(rec['metrics'][k], info.get(k, {}).get('fmt', '.3f'))}"
                           for k in names if k in rec.get("metrics", {}))
        items = "\n".join(f"{v} {k.replace('_', ' ')}" for k, v in rec.get("n_items", {}).items())
        table.add_row(_task_cell(o, rec), scores, items)
    console.print(table)
    for o in outcomes:
        rec = o.record or {}
        if rec.get("n_skipped_media"):
            first = [i for ids in rec.get("skipped_media", {}).values() for i in ids]
            console.print(f"{o.task}: {rec['n_skipped_media']} unreadable media left out of scoring "
                          f"(--skip-broken-media), e.g. {', '.join(first[:3])}", markup=False)
    folders = sorted({str(o.path.parent) for o in outcomes})
    console.print(f"records in {', '.join(folders)}; `negharness leaderboard` builds the leaderboard"
                  + ("; --overwrite reruns cached records" if any(o.skipped for o in outcomes) else ""))


def _task_cell(outcome: Any, rec: dict[str, Any]) -> str:
    """The task, its variant (a --limit or -T run) and whether it was reused or why it reran."""
    from rich.markup import escape

    text = outcome.task + (f" [{rec['variant_label']}]" if rec.get("variant_label") else "")
    if outcome.skipped:
        text += " (cached)"
    elif outcome.reason:
        text += f" (rerun: {outcome.reason})"
    return escape(text)  # "[limit=2]" is text, not a Rich style


def cmd_train(args: argparse.Namespace) -> int:
    from negharness.api.model import ModelOptions  # lazy: start-up time
    from negharness.api.training import TrainOptions  # lazy: start-up time
    from negharness.discovery.lookup import PluginLookup  # lazy: start-up time

    if args.nproc and args.nproc > 1:  # re-launch this command under torchrun, one process per rank
        import subprocess

        return subprocess.call(torchrun_argv(args.nproc, sys.argv[1:] if args.argv is None else args.argv))
    host = _host(args)
    entry = host.registry.get("trainer", args.trainer)
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
        path = entry.load()(opts)
    if from_env().main:
        _console().print(f"wrote {path}")
    return 0


def cmd_fetch(args: argparse.Namespace) -> int:
    """`negharness fetch`: the sources the patterns name, into the data root (exit 1 while some wait
    for a person: their steps are printed)."""
    from negharness.fetch import session  # lazy: start-up time
    from negharness.fetch.select import download_size, select  # lazy: start-up time
    from negharness.fetch.sources import SOURCES, human_size, read_sources  # lazy: start-up time
    from negharness.io.paths import data_root  # lazy: start-up time

    sources = read_sources(args.sources) if args.sources else SOURCES
    if not args.pattern and not args.list:
        raise UserError("negharness fetch: name a task, glob or benchmark (e.g. 'sugarcrepe_*', negbench), "
                        "or --list the sources")
    host = _host(args)
    names = [e.name for kind in ("task", "trainset") for e in host.registry.entries(kind)]
    chosen = select(args.pattern, names, sources) if args.pattern else list(sources)
    root, _ = data_root(args.data_root)
    console, err = _console(), _console(stderr=True)
    if args.list:
        for s in chosen:
            check = "by hand" if s.kind == "manual" else session.pin_kind(s)
            state = "in place" if session.in_place(s, root) else "missing"
            console.print(f"{s.name}  {s.kind}  {human_size(s.size)}  {check}  {state}  {s.url or '-'}",
                          markup=False, highlight=False, soft_wrap=True)
        console.print(f"data root {root}; download {download_size(chosen)}", markup=False, highlight=False)
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
    with bar:
        outcomes = session.fetch_sources(chosen, root, args.jobs, bar,
                                         log=lambda line: err.print(line, markup=False, highlight=False))
    waiting = [o for o in outcomes if o.state == "by hand"]
    for o in outcomes:
        line = f"{o.source.name}: {o.state}" + (f" ({o.note})" if o.note and o.state != "by hand" else "")
        console.print(line, markup=False, highlight=False)
    for o in waiting:
        console.print(f"\n{o.source.name}: by hand: {o.note}\nthen run this command again to check it.",
                      markup=False, highlight=False, soft_wrap=True)
    return 1 if waiting else 0


# parser --------------------------------------------------------------------------------------------
def _model_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model options (shared by every model plugin)")
    g.add_argument("--arch", help="architecture name or config file (e.g. ViT-B-32, path/to/config.json)")
    g.add_argument("--pretrained", help="pretrained tag (e.g. openai, laion400m_e31)")
    g.add_argument("--checkpoint", help="local checkpoint file (safetensors or weights-only torch file)")
    g.add_argument("-M", "--model-arg", action="append", metavar="KEY=VALUE",
                   help="plugin-specific model option, repeatable (e.g. -M quick_gelu=true)")


# The run settings, one spelling and one help for every command that loads a model; each command
# takes those its protocol honours (a setting it would only record is not offered).
RUN_SETTINGS: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "device": (("--device",), {"default": "auto", "help": "auto | cpu | cuda | cuda:N (default auto)"}),
    "precision": (("--precision",), {"default": "fp32", "choices": ["fp32", "fp16", "bf16"],
                                    "help": "autocast precision (default fp32)"}),
    "batch_size": (("--batch-size",), {"type": int, "default": 64, "help": "items per encoded batch (default 64)"}),
    "workers": (("--workers",), {"type": int, "default": None,
                                 "help": "data-loading worker processes (default: automatic)"}),
    "seed": (("--seed",), {"type": int, "default": 0, "help": "the run's seed (default 0)"}),
    "data_root": (("--data-root",), {"help": "where tasks read files (else $NEGHARNESS_DATA, "
                                             "else ~/.cache/negharness/data)"}),
    "cache_dir": (("--cache-dir",), {"help": "embedding cache root (else $NEGHARNESS_CACHE, else ~/.cache/negharness)"}),
}


def _run_settings(p: argparse.ArgumentParser, *names: str, **overrides: dict[str, Any]) -> None:
    """The named run settings, as every command spells them; ``overrides`` change one setting's
    default or help where a command's protocol differs (training's precision has ``auto``)."""
    g = p.add_argument_group("run settings (the same for every command that loads a model)")
    for name in names:
        flags, kwargs = RUN_SETTINGS[name]
        g.add_argument(*flags, **{**kwargs, **overrides.get(name, {})})


def _include_path(p: argparse.ArgumentParser) -> None:
    p.add_argument("--include-path", action="append", metavar="DIR",
                   help="folder of YAML task files (choice, retrieval or suite tasks) to add, repeatable")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="negharness", description="Measure and improve how vision-language models understand negation.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"negharness {__version__}")
    parser.add_argument("-p", dest="plugin", action="append", metavar="no:NAME",
                        help="block the plugin NAME (repeatable); also $NEGHARNESS_DISABLE_PLUGINS=a,b")
    parser.add_argument("--strict-plugins", action="store_true",
                        help="a plugin that fails to load is an error (default: a warning)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("list", help="every model, task and trainer, with the plugin that gave it and its options")
    _include_path(p)
    p.add_argument("--brief", action="store_true",
                   help="names and descriptions only: no plugin module is imported (instant, no torch)")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("fetch", help="download the files tasks read (pinned, SHA-256 checked, resumable) into the "
                                     "data root")
    p.add_argument("pattern", nargs="*", metavar="TASK|GLOB|BENCHMARK",
                   help="task name or glob ('sugarcrepe_*'), benchmark (negbench, aro, ...) or source name")
    p.add_argument("--jobs", type=int, default=4, help="files downloaded at once (default 4)")
    p.add_argument("--list", action="store_true", help="show the sources (size, checksum, in place?) and fetch nothing")
    p.add_argument("--sources", metavar="FILE", help="a JSON list of sources to use instead of the built-in table "
                                                    "(a mirror, private data)")
    _include_path(p)
    _run_settings(p, "data_root")
    p.set_defaults(func=cmd_fetch)

    p = sub.add_parser("run", help="evaluate a model on tasks", epilog=EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="model name (see `negharness list`)")
    p.add_argument("--task", required=True, action="append", help="task name or glob, repeatable ('shapes_*')")
    _model_options(p)
    _include_path(p)
    p.add_argument("-T", "--task-arg", action="append", metavar="KEY=VALUE", help="task option, repeatable")
    _run_settings(p, "device", "precision", "batch_size", "workers", "seed", "data_root", "cache_dir")
    p.add_argument("--limit", type=int, default=None, help="cut each task to N items for a quick check")
    p.add_argument("--output-dir", default="results", help="where result records go (default results/)")
    p.add_argument("--log-samples", action="store_true", help="write per-query outputs beside each record")
    p.add_argument("--overwrite", action="store_true", help="rerun tasks whose record already exists")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the embedding cache")
    p.add_argument("--skip-broken-media", action="store_true",
                   help="skip and count images/videos that cannot be decoded (default: stop with an error)")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("leaderboard", help="result records -> <results-dir>/README.md and a terminal table")
    p.add_argument("--results-dir", default="results", help="folder of result records (default results/)")
    p.add_argument("--out", help="Markdown to write (default: README.md in --results-dir, beside the records; "
                                 "the committed board: --results-dir leaderboard/results --out leaderboard/README.md)")
    p.add_argument("--html", metavar="DIR", help="also write the static web page (index.html) into DIR")
    p.add_argument("--experiment", metavar="FILE",
                   help="Markdown experiment table shown on the page (default: negation_training.md beside --out)")
    p.add_argument("--check", action="store_true",
                   help="write nothing: exit 1 when a record is invalid or the board (and page) is stale")
    p.set_defaults(func=cmd_leaderboard)

    p = sub.add_parser("export", help="result records -> MTEB, lm-eval or Every Eval Ever files (README: Export)")
    p.add_argument("--format", required=True, choices=["mteb", "lm-eval", "eee"],
                   help="mteb: <org>__<model>/<revision>/<Task>.json; lm-eval: <model>/results_<date>.json; "
                        "eee: data/<benchmark>/<developer>/<model>/<uuid>.json")
    p.add_argument("results_dir", metavar="RESULTS_DIR", help="folder of result records (e.g. results/)")
    p.add_argument("out", metavar="OUT", help="folder to write into (MTEB's results/, lm-eval's output "
                                              "path, the EEE datastore root)")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("build-queries", help="negated and composed query sets from a caption file (nT2VR formats)")
    p.add_argument("--captions", required=True,
                   help="nT2VR '<cap_id> <caption>' file, or a CSV / JSON of item ids and captions")
    p.add_argument("--out", required=True, help="folder for <c>.negated.txt, <c>.composed.txt, ...")
    p.add_argument("--name", help="collection name (default: from the file name)")
    p.add_argument("--id-column", help="CSV column with item ids (default image_id)")
    p.add_argument("--caption-column", help="CSV column with captions or a list literal of them (default captions)")
    p.add_argument("--mode", choices=["one", "all"], default="one",
                   help="one negated variant per caption, chosen with --seed (the paper), or all")
    p.add_argument("--per-item", type=int, default=None,
                   help="cap on composed queries from the phrase pairings found first in one item "
                        "(default: no cap, as the paper's Table 1 counts)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--samples", type=int, default=5, help="samples of each kind to print")
    p.add_argument("--builder", default="nt2vr", help="the query-builder plugin (negharness list shows them)")
    p.set_defaults(func=cmd_build_queries)

    p = sub.add_parser("fire", help="FIRE's subsample bootstrap: the difference N queries of a task can detect")
    p.add_argument("--model", required=True)
    p.add_argument("--task", required=True, help="one retrieval task (-T qrels=FILE adds FIRE judgements)")
    _model_options(p)
    p.add_argument("-T", "--task-arg", action="append", metavar="KEY=VALUE", help="task option, repeatable")
    p.add_argument("--sizes", default="500,1000,3000", help="query counts N to resample (default 500,1000,3000)")
    p.add_argument("--resamples", type=int, default=10_000, help="resamples per N (default 10,000, as FIRE)")
    p.add_argument("--out", default="fire.png", help="plot of the distributions (PNG or SVG)")
    _run_settings(p, "device", "precision", "batch_size", "workers", "seed", "data_root", "cache_dir",
                  seed={"help": "the run's seed and the resampling seed (default 0)"})
    p.set_defaults(func=cmd_fire)

    p = sub.add_parser("compare", help="paired bootstrap and McNemar tests between two models' records")
    p.add_argument("a", metavar="A", help="record folder, or a model label / folder name under --results-dir")
    p.add_argument("b", metavar="B", help="the model compared with A (differences are B - A)")
    p.add_argument("--task", help="compare this task only")
    p.add_argument("--results-dir", default="results", help="where labels are looked up (default results/)")
    p.add_argument("--markdown", metavar="FILE", help="also write the comparison as Markdown")
    p.add_argument("--resamples", type=int, default=10_000)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("diagnose", help="NegBench's PCA picture of how a model embeds negated captions")
    p.add_argument("--model", required=True)
    _model_options(p)
    p.add_argument("--objects", help="comma-separated objects (default: the objects the model's plugin "
                        "declares, e.g. shapes_clip's world shapes; else ten COCO objects)")
    p.add_argument("--out", default="diagnose.png", help="PNG to write (default diagnose.png)")
    p.add_argument("--results-dir", default="results",
                   help="the PCA data goes to <results-dir>/<model dir>/diagnose.diagnosis.json, beside the model's "
                        "records, where `leaderboard --html` draws it (default results/)")
    _run_settings(p, "device")  # a few dozen captions, encoded in fp32 in one batch: nothing else to set
    p.set_defaults(func=cmd_diagnose)

    p = sub.add_parser("train", help="train a model with a trainer plugin")
    p.add_argument("--trainer", required=True)
    p.add_argument("--model", help="model to start from (trainer-specific)")
    p.add_argument("--task", help="training set (`negharness list` shows them: shapes, msrvtt10ktrain, "
                                  "negbench_negfull, captions ...)")
    p.add_argument("--out", required=True, help="output folder (checkpoints, model, training record)")
    _model_options(p)
    p.add_argument("-O", "--option", action="append", metavar="KEY=VALUE", help="trainer option, repeatable")
    p.add_argument("-T", "--task-arg", action="append", metavar="KEY=VALUE", help="training-set option, repeatable")
    _run_settings(p, "device", "precision", "batch_size", "workers", "seed", "data_root", "cache_dir",
                  precision={"default": None, "choices": ["auto", "bf16", "fp16", "fp32"],
                             "help": "as for run (default: the trainer's, auto: bf16 on GPUs, fp32 on CPUs)"},
                  batch_size={"default": None, "help": "training batch size (default: the trainer's, 64)"},
                  workers={"help": "DataLoader worker processes (default: min(8, CPUs - 1))"},
                  data_root={"help": "where training data lives or is generated (as for run)"})
    p.add_argument("--max-steps", type=int, help="stop after this many optimizer steps (resumable)")
    p.add_argument("--limit", type=int, help="use only the first N items of each training set stream")
    p.add_argument("--nproc", type=int, help="train on N processes (DDP) by re-launching under torchrun")
    p.set_defaults(func=cmd_train, argv=None)
    return parser


def _one_line_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                      file: Any = None, line: str | None = None) -> None:
    """Warnings as ``warning: <message>`` on one line: Python's default adds the file, line number
    and the source line that warned (``index = self._load()``), which tell a user nothing."""
    text = " ".join(part.strip() for part in str(message).splitlines() if part.strip())
    kind = "" if issubclass(category, UserWarning) else f"{category.__name__}: "
    try:
        (file or sys.stderr).write(f"warning: {kind}{text}\n")
    except (OSError, ValueError):  # a closed or broken stderr: nothing to tell
        pass


def _quiet_library_logging() -> None:
    """Libraries that log through the root logger (open_clip: "ERROR:root:Failed to download ...",
    "WARNING:root:No pretrained weights loaded ...") would print around our one-line error; what
    they say that matters, the command says itself. A handler on the root logger keeps Python
    from installing its printing default; NEGHARNESS_DEBUG=1 keeps their lines."""
    import logging

    root = logging.getLogger()
    if not root.handlers and not env_flag("NEGHARNESS_DEBUG"):
        root.addHandler(logging.NullHandler())


def main(argv: Sequence[str] | None = None) -> int:
    """The `negharness` command. Called from Python with ``argv``, it returns the exit code. Called
    without (the console script, ``python -m negharness``), it is the process: it ends it once the
    command is over (`exit_now`: output flushed, no interpreter teardown where torch was loaded)."""
    code = _main(argv)
    if argv is None:  # a real process (console script, python -m), not a call from Python
        exit_now(code)
    return code


def _main(argv: Sequence[str] | None) -> int:
    prefer_passive_waiting()  # before any command imports torch
    warnings.showwarning = _one_line_warning
    try:
        check_env_flags()
    except UserError as exc:
        _console(stderr=True).print(f"error: {exc}", markup=False, highlight=False)
        return 2
    _quiet_library_logging()
    parser = build_parser()
    args = parser.parse_args(argv)
    if argv is not None and hasattr(args, "argv"):
        args.argv = list(argv)  # what --nproc re-launches
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        _console(stderr=True).print("interrupted; finished records and cached embeddings are kept")
        return 130
    except Exception as exc:
        if debug_requested() and not isinstance(exc, UserError):
            raise
        where = ", ".join(f"{flag} {value}" for flag, value in (
            ("--cache-dir", getattr(args, "cache_dir", None) or "$NEGHARNESS_CACHE"),
            ("--output-dir", getattr(args, "output_dir", None))) if value)
        message, code = one_line(exc, where or "the current folder")
        from rich.text import Text

        _console(stderr=True).print(Text.assemble((f"{rank_label()}error: ", "bold red"), message), soft_wrap=True)
        return code


if __name__ == "__main__":
    sys.exit(main())
