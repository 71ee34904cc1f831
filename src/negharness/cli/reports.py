"""The `negharness` commands that read records or probe a model rather than run tasks: leaderboard,
compare, fire, diagnose, build-queries. Each imports what it needs when called, so ``--help`` stays instant.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from negharness.cli.common import _console, _host, _pairs
from negharness.contracts.errors import UserError

if TYPE_CHECKING:  # imported where used: start-up time
    from negharness.contracts.model import ModelPlugin
    from negharness.discovery.manager import PluginHost
    from negharness.discovery.registry import Entry
    from negharness.report.diagnose import Diagnosis


def cmd_leaderboard(args: argparse.Namespace) -> int:
    from negharness.records.board_pass import checked_records  # lazy: start-up time
    from negharness.report.diagnosis_file import load_all  # lazy: start-up time
    from negharness.report.leaderboard import (  # lazy: start-up time
        build_tables,
        to_markdown,
        to_rich,
    )
    from negharness.report.page import site_files  # lazy: start-up time
    from negharness.io.atomic_files import atomic_write_text  # lazy: start-up time

    results = Path(args.results_dir)
    if not results.is_dir():
        raise UserError(f"--results-dir {results}: no such folder (run `negharness run` first)")
    invalid: list[str] = []  # --check lists every refused record's problems; else the first one stops
    records = list(checked_records(results, invalid if args.check else None, args.cache_dir))
    diagnoses = load_all(results)  # likewise a damaged `negharness diagnose` result
    tables = build_tables(records)
    out = Path(args.out) if args.out else results / "README.md"
    expected = {out: to_markdown(tables, out)}
    if args.html:
        experiment = Path(args.experiment) if args.experiment else out.parent / "negation_training.md"
        site = Path(args.html)
        expected.update({site / name: text for name, text in site_files(tables, records, site, experiment, diagnoses).items()})
    console = _console()
    if args.check:
        from negharness.report.check import (  # lazy: start-up time
            diagnosis_problems,
            partial_records,
            stale_files,
            unverifiable_metrics,
        )

        problems = invalid + diagnosis_problems(results, records) + stale_files(expected)
        unchecked = unverifiable_metrics(records)
        if unchecked:
            console.print("not verifiable (no per-query values to recompute them from; the record's number is "
                          "taken as written):", markup=False, highlight=False)
            for line in unchecked:
                console.print(f"  {line}", markup=False, highlight=False)
        partial = partial_records(records)
        if partial:
            console.print(f"left aside: {len(partial)} --limit record(s), never on the board "
                          f"(e.g. {partial[0]})", markup=False, highlight=False)
        for p in problems:
            console.print(p, markup=False, highlight=False)
        if problems:
            console.print(f"leaderboard check failed ({len(problems)} problem(s)); regenerate with "
                          f"`negharness leaderboard --results-dir {results} --out {out}"
                          + (f" --html {args.html}`" if args.html else "`"), markup=False)
            return 1
        console.print(f"leaderboard check: {len(records)} record(s) valid"
                      + (f", {len(diagnoses)} diagnosis file(s) valid" if diagnoses else "")
                      + f", {len(expected)} file(s) up to date")
        return 0
    for path, text in expected.items():
        try:
            atomic_write_text(path, text)
        except OSError as exc:
            raise UserError(f"{path}: cannot write ({exc.strerror or exc})") from exc
    for table in to_rich(tables, console.width):
        console.print(table)
    console.print("wrote " + ", ".join(str(p) for p in expected))
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from negharness.records.compare import (  # lazy: start-up time
        compare,
        load_runs,
        method_text,
        to_markdown,
        to_rich,
    )
    from negharness.io.atomic_files import atomic_write_text  # lazy: start-up time

    if args.resamples < 1:
        raise UserError("--resamples must be at least 1")
    label_a, runs_a = load_runs(args.a, Path(args.results_dir), args.task, args.cache_dir)
    label_b, runs_b = load_runs(args.b, Path(args.results_dir), args.task, args.cache_dir)
    results = compare(runs_a, runs_b, args.resamples, args.seed)
    console = _console()
    console.print(method_text(results, args.resamples, args.seed), markup=False)
    for item in to_rich(label_a, label_b, results):
        console.print(item)
    if args.markdown:
        try:
            atomic_write_text(Path(args.markdown), to_markdown(label_a, label_b, results, args.resamples, args.seed))
        except OSError as exc:
            raise UserError(f"--markdown {args.markdown}: cannot write ({exc.strerror or exc})") from exc
        console.print(f"wrote {args.markdown}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from negharness.records.export import export  # lazy: start-up time
    from negharness.records.published import registered_rows  # lazy: start-up time

    registry = _host(args).registry  # the tasks' registrations name the papers' tables
    done = export(Path(args.results_dir), Path(args.out), args.format, lambda task: registered_rows(task, registry))
    console = _console()
    for line in done.left_aside:
        console.print(f"left aside: {line}", markup=False, highlight=False)
    console.print(f"wrote {len(done.files)} {args.format} file(s) into {args.out}", markup=False, highlight=False)
    return 0


def cmd_build_queries(args: argparse.Namespace) -> int:
    import random

    from rich.table import Table

    from negharness.contracts.queries import QueryBuildOptions  # lazy: start-up time

    path = Path(args.captions)
    if not path.is_file():
        raise UserError(f"--captions {path}: no such file")
    builder = _host(args).registry.get("query_builder", args.builder).load()
    built = builder(QueryBuildOptions(path, Path(args.out), args.name, args.id_column, args.caption_column,
                                      args.mode, args.seed, args.per_item))
    console = _console()
    table = Table(title="queries built (cf. nT2VR Table 1)", title_justify="left")
    table.add_column("what")
    table.add_column("count", justify="right")
    for key, value in built.counts.items():
        table.add_row(key.replace("_", " "), str(value))
    console.print(table)
    rng = random.Random(args.seed)
    for label, rows in built.examples.items():
        for ident, text in rng.sample(rows, min(args.samples, len(rows))):
            console.print(f"  {label:8} {ident}: {text}", highlight=False, markup=False)
    for p in built.paths:
        console.print(f"wrote {p}")
    return 0


def cmd_fire(args: argparse.Namespace) -> int:
    """FIRE's subsample bootstrap: how large a difference N queries of this task can detect."""
    import json
    import tempfile

    from rich.table import Table

    from negharness.contracts.model import ModelOptions  # lazy: start-up time
    from negharness.engine.plan import planned  # lazy: start-up time
    from negharness.engine.request import RunRequest  # lazy: start-up time
    from negharness.scoring.fire import (  # lazy: start-up time
        check_sizes,
        default_sizes,
        detectable_differences,
        plot_deltas,
    )

    sizes = None if args.sizes is None else [int(x) for x in args.sizes.split(",") if x.strip()]
    if (sizes is not None and (not sizes or min(sizes) < 1)) or args.resamples < 1:
        raise UserError("--sizes must be positive integers (e.g. 500,1000,3000) and --resamples at least 1")
    host = _host(args)
    with tempfile.TemporaryDirectory() as tmp:
        req = RunRequest(model=args.model, tasks=[args.task], data_root=args.data_root, device=args.device,
                         model_options=ModelOptions(args.arch, args.pretrained, args.checkpoint, _pairs(args.model_arg, "-M")),
                         task_extra=_pairs(args.task_arg, "-T"), output_dir=tmp, log_samples=True, cache_dir=args.cache_dir,
                         precision=args.precision, batch_size=args.batch_size, workers=args.workers, seed=args.seed)
        plan, hasher = planned(host, req)  # every refusal of the request, before torch
        for item in plan.tasks if sizes is not None else ():  # --sizes the task cannot supply, before torch too
            count = item.task.query_count()
            if count is not None:
                check_sizes(sizes or [], count, item.task.name)
        from negharness.engine.evaluate import run_evaluation  # lazy: torch, once the request is checked

        outcomes = run_evaluation(host, plan, hasher=hasher)
        if len(outcomes) != 1:
            raise UserError(f"--task {args.task}: name one retrieval task (it matched {len(outcomes)})")
        task = outcomes[0].task
        samples_file = outcomes[0].path.with_suffix(".samples.jsonl")
        lines = samples_file.read_text().splitlines() if samples_file.is_file() else []  # none: no task samples
        samples = [json.loads(line) for line in lines]
    if not samples or "rank" not in samples[0]:
        raise UserError(f"task {args.task}: has no per-query ranks (FIRE needs a retrieval task)")
    console = _console()
    if sizes is None:
        sizes, note = default_sizes(len(samples))
        if note:
            console.print(f"{task}: {note}", markup=False, highlight=False)
    else:
        check_sizes(sizes, len(samples), task)
    table, dists = detectable_differences(samples, sizes, args.resamples, args.seed)
    out = Table(title=f"{args.model} on {args.task}: smallest difference N queries detect (95%), "
                      f"{len(samples)} queries, {args.resamples} resamples", title_justify="left")
    out.add_column("metric")
    for n in sizes:
        out.add_column(f"N={n}", justify="right")
    for metric, row in table.items():
        out.add_row(metric, *(f"{row[n]:.3f}" for n in sizes))
    console.print(out)
    png = plot_deltas(dists, Path(args.out), f"{args.model} / {args.task}")
    console.print(f"wrote {png}")
    return 0


def cmd_diagnose(args: argparse.Namespace) -> int:
    from negharness.contracts.model import ModelOptions  # lazy: start-up time
    from negharness.discovery.lookup import PluginLookup  # lazy: start-up time
    from negharness.engine.devices import resolve_device  # lazy: start-up time
    from negharness.report.diagnose import (  # lazy: start-up time
        default_objects,
        diagnose,
    )

    host = _host(args)
    entry = host.registry.get("model", args.model)  # an unknown name fails before the options are read
    objects = [o.strip() for o in args.objects.split(",") if o.strip()] if args.objects else None
    if objects is not None and len(objects) < 2:
        raise UserError("--objects needs at least two objects, comma-separated")
    device = resolve_device(args.device)
    options = ModelOptions(args.arch, args.pretrained, args.checkpoint, _pairs(args.model_arg, "-M"))
    lookup = PluginLookup(host.registry, device)
    options, identity = lookup.identified(entry, options)  # the folder a run of these options writes
    model = lookup.create("model", args.model, options)
    source = "--objects"
    if objects is None:  # the model's own words where its plugin declares them (shapes_clip: the world's)
        objects, source = default_objects(model)
    result = diagnose(model, objects, Path(args.out))
    saved = _save_diagnosis(args, host, entry, model, identity, objects, result)
    console = _console()
    console.print(f"{args.model}: {result.n_captions} captions over {len(objects)} objects ({source}: "
                  f"{', '.join(objects[:4])}{', …' if len(objects) > 4 else ''})", highlight=False, markup=False)
    console.print(f"  mean cos('X', 'not X')            {result.same_object_negation:.3f}")
    console.print(f"  mean cos('X', 'Y'), different X,Y  {result.different_objects:.3f}")
    console.print(f"  negation gap                       {result.negation_gap:+.3f}  "
                  "(> 0: 'not X' sits closer to 'X' than another object does)")
    console.print(f"wrote {result.png}, {saved}")
    return 0


def _save_diagnosis(args: argparse.Namespace, host: PluginHost, entry: Entry, model: ModelPlugin,
                    identity: dict[str, Any], objects: list[str], result: Diagnosis) -> Path:
    """The PCA picture as data beside the model's records (the folder a run of these options writes),
    for the leaderboard page."""
    from negharness.contracts.hashing import hash_json  # lazy: start-up time
    from negharness.records.results import (  # lazy: start-up time
        ModelConfig,
        environment_versions,
        now_iso,
    )
    from negharness.report import diagnosis_file  # lazy: start-up time

    cfg = ModelConfig(args.model, identity)
    fingerprint = model.fingerprint() if hasattr(model, "fingerprint") else hash_json(model.describe())
    block = {"name": cfg.name, "label": cfg.label, "options": cfg.options, "plugin": entry.plugin,
             "fingerprint": fingerprint, "describe": model.describe()}
    content = diagnosis_file.build(block, objects, result.rows, result.xy, result.explained, result.summary(),
                                   now_iso(), environment_versions(host.distributions()))
    path = diagnosis_file.diagnosis_path(Path(args.results_dir), cfg)
    try:
        return diagnosis_file.write(path, content)
    except OSError as exc:
        raise UserError(f"{path}: cannot write ({exc.strerror or exc})") from exc
