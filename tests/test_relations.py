"""Two roads, one number: R1 skip-broken = rows removed, R2 shuffle, R3 list/tuple/set/JSON cells, R4 YAML = built-in twin, R5 --overwrite = fresh, R6 changed file = fresh rerun, R7 random weights never reused, R8 warm = cold cache, R9 compare A A = 0, R10 2 ranks = 1, R11 --limit N = N rows, R12 a file read when present, added after a run = fresh rerun on every road (the run, the CLI's receipt, negharness.run).

Every registered task (built-in, YAML choice suites, the third-party example) is enumerated; each
relation that applies to it runs on tiny data from `relations_data`, with the keyword model, in this
process (R10 alone starts torchrun). A task with neither a builder nor a reason in
`relations_data.NO_BUILDER` fails `test_every_task_is_covered`. Each relation's check is also shown
to report a difference on a deliberately broken copy (`test_each_relation_can_fail`).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import shutil
import sys
import types
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from conftest import THIRDPARTY
from relations_data import (
    NO_BUILDER,
    AskingKeywordModel,
    Data,
    builder_for,
    cell,
    colour_judge,
    image,
    video,
)
from test_choice_readers import NEGBENCH_YAML

from negharness.api import UserError
from negharness.api import ModelOptions
from negharness.api import MetricInfo, Task, TaskOptions, TaskResult
from negharness.declarative.register import register_yaml_folder
from negharness.discovery.hookspecs import hookimpl
from negharness.engine.evaluate import RunOutcome, RunRequest, evaluate_request
from negharness.io.media import image_files
from negharness.records.compare import compare, load_runs
from negharness.scoring.metrics import Relevance, best_relevant_rank, retrieval_metrics
from negharness.testing import KeywordModel, host_with_models, keyword_model

EXAMPLE = THIRDPARTY / "good"
BROKEN_ROWS = (1, 3)  # R1 breaks these rows' media
LIMIT = 3  # R11
R7_TASKS = ("sugarcrepe_add_att",)  # building an open_clip model costs seconds: one task
R10_TASK = "sugarcrepe_add_att"  # torchrun costs seconds: one task, read by YAML, media by files
YAML_CHOICE = ("sugarcrepe_add_att", "sugarcrepe_add_obj", "sugarcrepe_replace_att", "sugarcrepe_replace_obj",
               "sugarcrepe_replace_rel", "sugarcrepe_swap_att", "sugarcrepe_swap_obj", "sugarcrepe_mean",
               "aro_vg_relation", "aro_vg_attribution", "aro_coco_order", "aro_flickr_order", "valse_existence",
               "crepe_negate", "ccneg")
# (task, relation) pairs a defect of src/ breaks today: fixed in parallel, they xfail strictly until then
XFAIL: dict[tuple[str, str], str] = {
}
# (task, relation) pairs where the relation does not hold by design, with why
NOT_APPLICABLE = {
    **{(t, r): "ARO's order shuffles are seeded per record by where it is read (file:record), so a reordered or "
               "cut file draws other shuffles: a different measurement by design"
       for t in ("aro_coco_order", "aro_flickr_order") for r in ("R1", "R2")},
    # its main score averages attribute pairs with 25 or more rows (ARO's rule): the tiny data has none, so every
    # run of it is refused (test_a_main_score_no_group_reaches_is_refused), and refusals are not numbers to compare
    **{("aro_vg_attribution", r): "main score macro_accuracy needs attribute pairs of 25+ rows; the tiny data's "
                                  "runs are refused" for r in ("R1", "R2", "R5", "R6", "R8", "R9", "R11")},
    # a judged query is about no image of its own: a broken image leaves the pool (never judged: test_judged.py)
    # and every query stays, where removing the row removes its query too
    **{(t, "R1"): "judged retrieval keeps every query when an image is unreadable (the image leaves the pool); "
                  "removing a row removes its query"
         for t in [f"{p}_composed_judged" for p in ("mscoco", "flickr30k", "msrvtt3k", "msrvtt1k", "vatex")]},
}
# R4: (YAML file text, name) -> built-in twin, and the twin's metric/count name for each YAML one
NEGBENCH_RETRIEVAL_YAML = """\
name: negbench_coco_retrieval_as_yaml
kind: retrieval
family: negbench
description: "NegBench COCO retrieval (original captions) declared in YAML"
citation: "Alhamoud et al., CVPR 2025"
data_help: "NegBench CSVs into <data root>/negbench/"
data:
  file: negbench/COCO_val_retrieval.csv
media:
  path: "coco/val2017/{filepath}"
  strip_prefix: ["data/coco/images/val2017/"]
captions:
  field: captions
metrics: [R@1, R@5, R@10]
main_score: R@1
"""
SIMPLENEG_YAML = """\
name: simpleneg_as_yaml
kind: judged
family: judged
description: "SimpleNeg declared in YAML (kind: judged)"
citation: "Sammani et al., arXiv 2603.20554"
data_help: "negharness fetch simpleneg"
data:
  file: simpleneg/simpleneg.json
captions:
  field: "0"
questions:
  negation: "1"
  verification: "2"
pool:
  folder: coco/val2014
  size: 25000
main_score: final
"""
TWINS = {
    "negbench_mcq_coco": (NEGBENCH_YAML, "negbench_coco_as_yaml", {
        "metrics.accuracy": "metrics.accuracy", "metrics.tie_rate": "metrics.tie_rate",
        "n_items.rows": "n_items.questions", "n_items.images": "n_items.images"}),
    "negbench_retrieval_coco": (NEGBENCH_RETRIEVAL_YAML, "negbench_coco_retrieval_as_yaml", {
        "metrics.R@1": "metrics.R@1", "metrics.R@5": "metrics.R@5", "metrics.R@10": "metrics.R@10"}),
    "simpleneg": (SIMPLENEG_YAML, "simpleneg_as_yaml", {
        **{f"metrics.{m}": f"metrics.{m}" for m in ("final", "verification", "negation", "negation_given_verified")},
        "n_items.queries": "n_items.queries", "n_items.judged_images": "n_items.judged_images"}),
}
# R6-yaml: an edit of the twin's YAML file that changes its numbers (the options backwards; the negated captions)
YAML_EDITS = {"negbench_mcq_coco": ("[caption_0, caption_1, caption_2, caption_3]",
                                    "[caption_3, caption_2, caption_1, caption_0]"),
              "negbench_retrieval_coco": ("COCO_val_retrieval.csv",
                                          "COCO_val_negated_retrieval_llama3.1_rephrased_affneg_true.csv"),
              "simpleneg": ('negation: "1"\n  verification: "2"', 'negation: "2"\n  verification: "1"')}


def _quiet_host(extra_plugins: tuple[Any, ...] = (), models: dict[str, Any] | None = None):
    """The installed plugins, the third-party example (tests/thirdparty/good) and the keyword model;
    the example's folder is on sys.path only while its entry point is read and imported."""
    sys.path.insert(0, str(EXAMPLE))
    try:
        host = host_with_models({"kw": keyword_model, **(models or {})}, "relations")
        host.register(types.SimpleNamespace(negharness_register_judges=_register_judges), "relations_judges")
        for k, plugin in enumerate(extra_plugins):
            host.register(plugin, f"relations_extra_{k}")
        for entry in host.registry.entries("task"):
            entry.load()
    finally:
        sys.path.remove(str(EXAMPLE))
    return host


@hookimpl
def _register_judges(registry: Any) -> None:
    """The judge the judged tasks' runs name (`relations_data.Data.judge`)."""
    registry.add("stand_in_colour", colour_judge, "says whether the image shows the colour a question names")


def tasks_plugin(register: Callable[[Any], None]) -> Any:
    @hookimpl
    def negharness_register_tasks(registry):
        register(registry)
    return types.SimpleNamespace(negharness_register_tasks=negharness_register_tasks)


@lru_cache(maxsize=1)
def host():
    return _quiet_host(models={"asking_kw": lambda options: AskingKeywordModel()})


def registered() -> dict[str, Any]:
    """Task name -> registry entry, every registered task."""
    return {e.name: e for e in host().registry.entries("task")}


@cache
def data_for(name: str) -> Data | None:
    entry = registered()[name]
    make = builder_for(name, entry.meta.get("family") or getattr(entry.load(), "family", ""))
    return make(name) if make else None


def relations_for(name: str) -> list[str]:
    """The relations that apply to a task: data-free tasks have no rows to shuffle, cut or break;
    editing tasks have no embedding cache."""
    data = data_for(name)
    if data is None:
        return []
    editing = "edit" in getattr(registered()[name].load(), "modalities", ())
    out = ["R5", "R9"] + ([] if editing else ["R8"])
    if data.rows:
        out += ["R2", "R6", "R11"] + [f"R3-{f}" for f in data.forms if f != "list"]
        out += ["R1"] if data.media(Path("."), data.rows[0]) else []  # media embedded in the data: none to break
    out += ["R4", "R6-yaml"] if name in TWINS else []
    out += ["R7"] if name in R7_TASKS else []
    out += ["R10"] if name == R10_TASK else []
    out += ["R12"] if data.later else []
    return sorted((r for r in out if (name, r) not in NOT_APPLICABLE), key=lambda r: (int(r[1:].split("-")[0]), r))


def _pairs() -> list[Any]:
    pairs = []
    for name in sorted(registered()):
        data = data_for(name)
        for rel in relations_for(name):
            marks = [pytest.mark.needs(*[n for n in data.needs if n != "av"])] if set(data.needs) - {"av"} else []
            if "av" in data.needs:
                marks.append(pytest.mark.skipif(importlib.util.find_spec("av") is None, reason="PyAV not installed"))
            if (name, rel) in XFAIL:
                marks.append(pytest.mark.xfail(strict=True, reason=XFAIL[(name, rel)]))
            pairs.append(pytest.param(name, rel, marks=marks, id=f"{name}-{rel}"))
    return pairs


# one task, its data and host, and its cold run (shared by the relations that compare against it) -------
@dataclass
class Case:
    name: str
    data: Data
    host: Any
    tmp: Path
    model_options: ModelOptions = field(default_factory=ModelOptions)
    _base: tuple[Path, RunOutcome] | None = None

    def request(self, root: Path, out: Path, cache: Path | None = None, **kw: Any) -> RunRequest:
        return RunRequest(model=kw.pop("model", self.data.model), tasks=[self.name], data_root=str(root),
                          output_dir=str(out), cache_dir=str(cache or out / "cache"), task_extra=self.data.options(root),
                          device="cpu", model_options=kw.pop("model_options", self.model_options),
                          judge=kw.pop("judge", self.data.judge), **kw)

    def run(self, root: Path, out: Path, cache: Path | None = None, **kw: Any) -> RunOutcome:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return evaluate_request(self.host, self.request(root, out, cache, **kw))[0]

    def base(self) -> tuple[Path, RunOutcome]:
        if self._base is None:
            root = self.data.build(self.tmp / "data")
            self._base = root, self.run(root, self.tmp / "res", self.tmp / "cache")
        return self._base


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Case]:
    tmp, made = tmp_path_factory.mktemp("relations"), {}

    def case(name: str) -> Case:
        if name not in made:
            made[name] = Case(name, data_for(name), host(), tmp / name)
        return made[name]
    return case


@pytest.fixture(autouse=True, scope="module")
def _no_fsync():
    """Records and cache shards fsync as they are written; durability is not what is measured here, and
    a few hundred fsyncs are most of this module's time on a slow disk."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(os, "fsync", lambda fd: None)
        yield


# the checks: each takes two runs (or folders) and lists every difference -------------------------
def numbers(outcome: RunOutcome, keys: tuple[str, ...] = ("metrics", "n_items")) -> dict[str, Any]:
    return {k: outcome.record[k] for k in keys}


def differences(a: dict[str, Any], b: dict[str, Any], tol: float = 1e-9) -> list[str]:
    """Every leaf where two nested dicts of numbers differ (beyond ``tol``), by dotted key."""
    out = []
    for key in sorted(set(a) | set(b), key=str):
        if key not in a or key not in b:
            out.append(f"{key}: only in {'first' if key in a else 'second'}")
        elif isinstance(a[key], dict) and isinstance(b[key], dict):
            out += [f"{key}.{d}" for d in differences(a[key], b[key], tol)]
        elif isinstance(a[key], (int, float)) and isinstance(b[key], (int, float)):
            if not (np.isnan(a[key]) and np.isnan(b[key])) and not abs(a[key] - b[key]) <= tol:
                out.append(f"{key}: {a[key]} != {b[key]}")
        elif a[key] != b[key]:
            out.append(f"{key}: {a[key]!r} != {b[key]!r}")
    return out


def fresh_problems(fresh: RunOutcome, other: RunOutcome) -> list[str]:
    """R5/R6: the other run was made now (never `(cached)`) and gives the fresh run's numbers."""
    return (["reused (cached)"] if other.skipped else []) + differences(numbers(fresh), numbers(other))


def twin_problems(yaml_run: RunOutcome, builtin_run: RunOutcome, names: dict[str, str]) -> list[str]:
    """R4: each mapped number of the YAML task equals its twin's."""
    def pick(outcome: RunOutcome, keys) -> dict[str, Any]:
        return {k: outcome.record[k.split(".", 1)[0]].get(k.split(".", 1)[1]) for k in keys}
    got, want = pick(yaml_run, names), pick(builtin_run, names.values())
    return differences(got, {k: want[v] for k, v in names.items()})


def compare_problems(folder_a: Path, folder_b: Path) -> list[str]:
    """R9: `compare` of two record folders: each task compared (or it has no per-query values), every
    difference and interval bound 0."""
    _, a = load_runs(str(folder_a), folder_a)
    _, b = load_runs(str(folder_b), folder_b)
    out = []
    for t in compare(a, b, n=200):
        if t.skipped and "no per-query values" not in t.skipped:
            out.append(f"{t.task}: {t.skipped}")
        out += [f"{t.task}.{m.metric}: diff {m.diff} [{m.lo}, {m.hi}]" for m in t.metrics
                if (m.diff, m.lo, m.hi) != (0, 0, 0)]
    return out


def change(path: Path) -> None:
    """R6: another content, same format and size: media get another colour, texts swap colour words
    (or, having none, end in one more blank line)."""
    if path.suffix in (".jpg", ".png"):
        from PIL import Image

        with Image.open(path) as old:
            size, mean = old.size[0], np.asarray(old.convert("RGB")).reshape(-1, 3).mean(0)
        image(path, "magenta" if mean[0] > 200 and mean[1] > 200 else "yellow", size)
    elif path.suffix == ".mp4":
        video(path, "yellow", 6)
    elif path.suffix == ".pt":
        torch.save(_swap(torch.load(path, weights_only=True)), path)
    elif path.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(_swap(pq.read_table(path).to_pylist())), path)
    elif path.suffix == ".arrow":  # datasets' save_to_disk: an Arrow stream
        import pyarrow as pa

        with pa.memory_map(str(path)) as source:
            table = pa.ipc.open_stream(source).read_all()
        swapped = pa.Table.from_pylist(_swap(table.to_pylist()), schema=table.schema)
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(swapped)
    else:
        text = path.read_text()
        swapped = _swap(text)
        path.write_text(swapped if swapped != text else text + "\n")  # no colour word: one more (blank) line


def _swap(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("red", "\0").replace("blue", "red").replace("\0", "blue")
    if isinstance(value, dict):
        return {k: _swap(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_swap(v) for v in value]
    return value


def break_media(paths: list[Path]) -> None:
    """Half the bytes of one file, garbage for the next: unreadable either way."""
    for k, p in enumerate(paths):
        raw = p.read_bytes()
        p.write_bytes(raw[: len(raw) // 2] if k % 2 == 0 else b"not an image at all")


# the relations: (case, relation id, a fresh folder) -> the differences found ----------------------
def r1_skip_broken(case: Case, relation: str, tmp: Path) -> list[str]:
    data = case.data
    broken = [r for k, r in enumerate(data.rows) if k in BROKEN_ROWS]
    root = data.build(tmp / "broken")
    break_media([p for r in broken for p in data.media(root, r)])
    skipped = case.run(root, tmp / "r1", tmp / "c1", skip_broken_media=True)
    removed = data.build(tmp / "removed", [r for r in data.rows if r not in broken])
    return differences(numbers(case.run(removed, tmp / "r2", tmp / "c2")), numbers(skipped))


def r2_shuffle(case: Case, relation: str, tmp: Path) -> list[str]:
    _, first = case.base()
    rows = case.data.rows[1::2] + case.data.rows[::2]
    return differences(numbers(first, ("metrics",)),
                       numbers(case.run(case.data.build(tmp / "d", rows), tmp / "r"), ("metrics",)))


def r3_cells(case: Case, relation: str, tmp: Path) -> list[str]:
    """A list cell in another form: the same numbers, or refused with an error naming the file."""
    _, first = case.base()
    try:
        other = case.run(case.data.build(tmp / "d", form=relation.split("-")[1]), tmp / "r")
    except UserError as exc:
        return [] if any(s in str(exc) for s in (".csv", ".json")) else [f"refused without naming the file: {exc}"]
    return differences(numbers(first), numbers(other))


def twin_case(case: Case, tmp: Path, text: str) -> Case:
    """The case's YAML twin, written to ``tmp``/yaml and registered on a host of its own (as the next
    `negharness run --include-path` would read it)."""
    name = TWINS[case.name][1]
    (tmp / "yaml").mkdir(parents=True, exist_ok=True)
    (tmp / "yaml" / f"{name}.yaml").write_text(text)
    twin_host = _quiet_host((tasks_plugin(lambda registry: register_yaml_folder(registry, tmp / "yaml")),))
    return Case(name, case.data, twin_host, tmp)


def r4_twin(case: Case, relation: str, tmp: Path) -> list[str]:
    text, _, names = TWINS[case.name]
    root, builtin = case.base()
    return twin_problems(twin_case(case, tmp, text).run(root, tmp / "r"), builtin, names)


def r6_yaml(case: Case, relation: str, tmp: Path) -> list[str]:
    """The file a YAML task is declared in is read too: an edit of it is a rerun equal to a fresh run."""
    text = TWINS[case.name][0]
    root, _ = case.base()
    twin_case(case, tmp, text).run(root, tmp / "res", tmp / "c")
    edited = twin_case(case, tmp, text.replace(*YAML_EDITS[case.name]))
    return fresh_problems(edited.run(root, tmp / "fresh", tmp / "fc"), edited.run(root, tmp / "res", tmp / "c"))


def r5_overwrite(case: Case, relation: str, tmp: Path) -> list[str]:
    root, first = case.base()
    out = tmp / "res"
    case.run(root, out, tmp / "c")
    return fresh_problems(first, case.run(root, out, tmp / "c", overwrite=True))


def r6_changed_file(case: Case, relation: str, tmp: Path) -> list[str]:
    """Each file the task reads (every file its data root holds: those in Task.data_files() and any it
    forgets to list), changed in turn: the rerun is made again (never `(cached)`), and after the last
    change it equals a fresh run (a stale embedding of any changed file would show)."""
    root = case.data.build(tmp / "d")
    files = sorted(p for p in root.rglob("*") if p.is_file())
    out, cache = tmp / "res", tmp / "cache"
    case.run(root, out, cache)
    listed = case.host.registry.get("task", case.name).load()(TaskOptions(root, extra=case.data.options(root))).data_files()
    if not listed:
        return ["data_files() is empty"]
    media = [p for p in files if p.suffix in (".jpg", ".png", ".mp4")]
    chosen = [p for p in files if p not in media] + list(dict.fromkeys(media[:1] + media[-1:]))
    problems: list[str] = []
    last = None
    for path in chosen:
        change(path)
        try:
            last = case.run(root, out, cache)
        except UserError:  # the change made the file unreadable: the fresh run must say so too
            with pytest.raises(UserError):
                case.run(root, tmp / "fresh", tmp / "fc")
            return problems
        problems += [f"{path.relative_to(root)}: reused (cached)"] if last.skipped else []
    return problems + fresh_problems(case.run(root, tmp / "fresh", tmp / "fc"), last)


def _arch(tmp: Path) -> ModelOptions:
    arch = tmp / "arch.json"
    shutil.copy(Path(__file__).parents[1] / "src/negharness/plugins/weights/shapes_clip.json", arch)
    return ModelOptions(arch=str(arch))


def reuse_problems(first: RunOutcome, second: RunOutcome) -> list[str]:
    """R7: a second run of a random-weight model draws again: never reused, never the first's record."""
    return ["reused (cached)"] * second.skipped + ["wrote over the first draw's record"] * (second.path == first.path)


def r7_random_weights(case: Case, relation: str, tmp: Path) -> list[str]:
    root, _ = case.base()
    opts = _arch(tmp)
    first = case.run(root, tmp / "res", tmp / "c", model="clip", model_options=opts)
    return reuse_problems(first, case.run(root, tmp / "res", tmp / "c", model="clip", model_options=opts))


def r8_warm_cache(case: Case, relation: str, tmp: Path) -> list[str]:
    root, cold = case.base()
    return differences(numbers(cold), numbers(case.run(root, tmp / "res", case.tmp / "cache")))


def r9_compare_same(case: Case, relation: str, tmp: Path) -> list[str]:
    _, first = case.base()
    return compare_problems(first.path.parent, first.path.parent)


def r10_ranks(case: Case, relation: str, tmp: Path) -> list[str]:
    """The same task, model and data under torchrun with two gloo ranks on the CPU: numbers within 1e-6."""
    from test_sharded_eval import _records
    from test_sharded_eval import _run as torchrun

    root, _ = case.base()
    one = case.run(root, tmp / "r1", tmp / "c1", model="mean_colour")
    args = ["run", "--model", "mean_colour", "--task", case.name, "--device", "cpu", "--data-root", str(root),
            "--cache-dir", str(tmp / "c2"), "--output-dir", str(tmp / "r2")]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", os.pathsep.join([str(EXAMPLE), str(Path(__file__).parents[1] / "src")]))
        two = torchrun(args, tmp, 2)
    if two.returncode != 0:
        return [f"torchrun failed: {two.stderr[-2000:]}"]
    return differences(numbers(one), {k: _records(tmp / "r2")[case.name][k] for k in ("metrics", "n_items")}, 1e-6)


def r11_limit(case: Case, relation: str, tmp: Path) -> list[str]:
    root, _ = case.base()
    cut = case.run(case.data.build(tmp / "d", case.data.rows[:LIMIT]), tmp / "r1", tmp / "c1")
    return differences(numbers(cut), numbers(case.run(root, tmp / "r2", tmp / "c2", limit=LIMIT)))


# R12: the model whose numbers a read-when-present file changes (nT2VR's neginfo: the boolean baseline's parts);
# built in, so the first run leaves a receipt for the CLI's road to answer from
R12_MODEL = {"model": "boolean", "model_options": ModelOptions(extra={"base": "kw"})}


def _cli_road(case: Case, req: RunRequest) -> RunOutcome:
    """What `negharness run` does (`cli.commands.cmd_run`): the receipt's answer, else the run."""
    from negharness.engine.fingerprints import standing
    from negharness.engine.plan import make_plan

    return (standing(case.host, make_plan(case.host, req)) or evaluate_request(case.host, req))[0]


def _library_road(case: Case, req: RunRequest) -> RunOutcome:
    """`negharness.run`, on this case's host (the keyword model is not installed)."""
    import negharness
    import negharness.engine.library as library  # the door's own name for the host maker, whenever it was imported

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(library, "make_host", lambda *a, **k: case.host)
        return negharness.run(req.model, req.tasks, model_args=req.model_options.extra, task_args=req.task_extra,
                              data_root=req.data_root, output_dir=req.output_dir, cache_dir=req.cache_dir,
                              device=req.device)[0]


ROADS: dict[str, Callable[[Case, RunRequest], RunOutcome]] = {
    "run": lambda case, req: evaluate_request(case.host, req)[0], "cli": _cli_road, "library": _library_road}


def r12_read_when_present(case: Case, relation: str, tmp: Path,
                          roads: dict[str, Callable[[Case, RunRequest], RunOutcome]] | None = None) -> list[str]:
    """A file the task reads when present (`Data.later`), added after a run: on every road the rerun is
    made again (never `(cached)`) and gives a fresh run's numbers, which the file changes."""
    fresh_root = case.data.build(tmp / "fresh" / "d")
    case.data.add_later(fresh_root)
    fresh = case.run(fresh_root, tmp / "fresh" / "r", **R12_MODEL)
    problems: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, road in (roads or ROADS).items():
            root = case.data.build(tmp / name / "d")
            req = case.request(root, tmp / name / "r", **R12_MODEL)
            before = road(case, req)
            case.data.add_later(root)
            problems += [f"{name}: {p}" for p in fresh_problems(fresh, road(case, req))]
    return problems + ([] if differences(numbers(before), numbers(fresh)) else ["the file changes no number"])


RELATIONS = {"R1": r1_skip_broken, "R2": r2_shuffle, "R3": r3_cells, "R4": r4_twin, "R5": r5_overwrite,
             "R6": lambda case, r, tmp: (r6_yaml if r == "R6-yaml" else r6_changed_file)(case, r, tmp),
             "R7": r7_random_weights, "R8": r8_warm_cache, "R9": r9_compare_same,
             "R10": r10_ranks, "R11": r11_limit, "R12": r12_read_when_present}


def test_every_task_is_covered():
    """A registered task needs a data builder or a stated reason; a new task is covered by registering it."""
    names = registered()
    lacking = sorted(n for n in names if data_for(n) is None and n not in NO_BUILDER)
    assert lacking == [], f"no data builder and no reason in relations_data.NO_BUILDER: {lacking}"
    assert sorted(n for n in NO_BUILDER if n not in names) == []  # no stale reasons
    assert {"example_colours", "sugarcrepe_mean", "negbench_mcq_coco", "msrvtt1k_composed"} <= set(names)
    assert {r.split("-")[0] for n in names for r in relations_for(n)} == set(RELATIONS)


@pytest.mark.parametrize("name, relation", _pairs())
def test_relation(name: str, relation: str, cases: Callable[[str], Case], tmp_path: Path) -> None:
    problems = RELATIONS[relation.split("-")[0]](cases(name), relation, tmp_path)
    assert problems == [], problems


# broken copies: each relation's check reports the difference a plausible bug makes ----------------------
class BuggyColours(Task):
    """``colours.jsonl`` rows {"image", "captions"} (a list cell), text-to-image R@1 and MIR over the
    rows' images; ``bugs`` plants one mistake: drops_last (the last row read is lost), ignores_limit,
    unhashed (data_files() empty: changes go unseen), one_caption (a cell not starting with '[' is one
    caption), broken_as_black (an unreadable image becomes a black one, never skipped)."""

    name = "buggy_colours"
    family = "testing"
    modalities = frozenset({"text", "image"})
    main_score = "R@1"
    metric_info = {"R@1": MetricInfo(True, ".1f"), "MIR": MetricInfo(True, ".3f")}
    bugs: frozenset[str] = frozenset()

    def required_files(self) -> list[Path]:
        return [self.options.data_root / "colours.jsonl"]

    def data_files(self) -> list[Path]:
        return [] if "unhashed" in self.bugs else self.required_files() + [p for p, _ in self._rows()]

    def _rows(self) -> list[tuple[Path, list[str]]]:
        import ast

        rows = [json.loads(line) for line in self.required_files()[0].read_text().splitlines()]
        rows = rows[:-1] if "drops_last" in self.bugs else rows
        if self.options.limit and "ignores_limit" not in self.bugs:
            rows = rows[: self.options.limit]
        parse = (lambda c: ast.literal_eval(c) if c.startswith("[") else [c]) if "one_caption" in self.bugs else \
            (lambda c: list(json.loads(c) if c.startswith("[\"") else ast.literal_eval(c)))
        return [(self.options.data_root / r["image"], parse(r["captions"])) for r in rows]

    def evaluate(self, ctx: Any) -> TaskResult:
        from negharness.io.image_files import open_image

        rows = self._rows()
        paths = [p for p, _ in rows]

        def black_if_broken(i: int) -> Any:
            try:
                return open_image(paths[i])
            except Exception:  # noqa: BLE001 (the bug: any unreadable image passes as black)
                return np.zeros((8, 8, 3), dtype=np.uint8)
        media = image_files("testing/buggy", [p.name for p in paths], paths,
                            black_if_broken if "broken_as_black" in self.bugs else None)
        texts = [c for _, caps in rows for c in caps]
        emb = ctx.embed_media(media)
        kept = [i for i in range(len(paths)) if bool(torch.isfinite(emb[i]).all())]
        relevance = Relevance.from_lists([[kept.index(i)] for i, (_, caps) in enumerate(rows) if i in kept
                                          for _ in caps], len(kept))
        texts = [c for i, (_, caps) in enumerate(rows) if i in kept for c in caps]
        sim = ctx.embed_texts(texts) @ emb[kept].t()
        metrics = retrieval_metrics(best_relevant_rank(sim, relevance), ks=(1,))
        return TaskResult({k: metrics[k] for k in ("R@1", "MIR")}, {"queries": len(texts), "images": len(kept)})


BUGGY_ROWS = [(i, c) for i, c in enumerate(["red", "green", "blue", "yellow", "cyan", "magenta"])]
BUGGY_CAPTIONS = {"cyan": ["a magenta picture", "a cyan thing"]}  # row 4 retrieves the wrong image first


def _buggy_data() -> Data:
    def write(root: Path, rows, form: str) -> None:
        lines = []
        for i, colour in rows:
            image(root / f"{i}.png", colour)
            lines.append(json.dumps({"image": f"{i}.png",
                                     "captions": cell(BUGGY_CAPTIONS.get(colour, [f"a {colour} picture"]), form)}))
        (root / "colours.jsonl").write_text("\n".join(lines) + "\n")
    return Data(BUGGY_ROWS, write, lambda root, r: [root / f"{r[0]}.png"], forms=("list", "set"))


class StaleKeywordModel(KeywordModel):
    """Its texts embed by colour or, while FLIPPED, by the next colour; describe() does not say which,
    so a cache filled before the flip returns stale embeddings after it."""

    FLIPPED = False

    def encode_text(self, texts):
        out = super().encode_text(texts)
        return out.roll(1, dims=1) if StaleKeywordModel.FLIPPED else out


class RandomKeywordModel(KeywordModel):
    """Images embed through a fresh random projection each time the model is built, yet the model does
    not say its weights are random: the host would reuse one draw's record for another."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.randn(self.dim, self.dim)

    def encode_image(self, pixels):
        return super().encode_image(pixels) @ self.proj


@lru_cache(maxsize=1)
def buggy_host():
    def register(registry):
        for bug in ("", "drops_last", "ignores_limit", "unhashed", "one_caption", "broken_as_black"):
            cls = type(f"Buggy_{bug}", (BuggyColours,), {"bugs": frozenset({bug}), "name": f"buggy_{bug or 'none'}"})
            registry.add(cls.name, cls, "a deliberately broken task")
    return _quiet_host((tasks_plugin(register),), {"stale": lambda o: StaleKeywordModel(),
                                                    "random_kw": lambda o: RandomKeywordModel()})


def _broken_r4(case: Case, tmp: Path) -> list[str]:
    """A YAML twin whose options are listed backwards: its answer points at another caption."""
    text, _, names = TWINS[case.name]
    root, builtin = case.base()
    return twin_problems(twin_case(case, tmp, text.replace(*YAML_EDITS[case.name])).run(root, tmp / "r"), builtin, names)


def _broken_r8(case: Case, tmp: Path) -> list[str]:
    """A cache that returns stale embeddings: filled before the model changed in a way its key does not see."""
    root = case.data.build(tmp / "d")
    try:
        case.run(root, tmp / "r0", tmp / "warm", model="stale")
        StaleKeywordModel.FLIPPED = True
        cold = case.run(root, tmp / "r1", tmp / "cold", model="stale")
        return differences(numbers(cold), numbers(case.run(root, tmp / "r2", tmp / "warm", model="stale")))
    finally:
        StaleKeywordModel.FLIPPED = False


def _broken_r9(case: Case, tmp: Path) -> list[str]:
    """compare of a run with a run after one image changed: not zero."""
    root = case.data.build(tmp / "d")
    a = case.run(root, tmp / "a")
    image(case.data.media(root, case.data.rows[0])[0], "blue")  # row 0 (red, "a red car" vs "a blue car") now wrong
    return compare_problems(a.path.parent, case.run(root, tmp / "b").path.parent)


def _broken_r10(case: Case, tmp: Path) -> list[str]:
    """Two runs that differ beyond the tolerance, as a rank that scored its own share would."""
    one = case.run(case.data.build(tmp / "d"), tmp / "r")
    other = json.loads(json.dumps(one.record))
    other["metrics"]["MIR"] += 1e-3
    return differences(numbers(one), {k: other[k] for k in ("metrics", "n_items")}, 1e-6)


BROKEN: dict[str, tuple[str, Callable[[Case, Path], list[str]]]] = {
    "R1": ("broken_as_black", lambda c, t: r1_skip_broken(c, "R1", t)),
    "R2": ("drops_last", lambda c, t: r2_shuffle(c, "R2", t)),
    "R3": ("one_caption", lambda c, t: r3_cells(c, "R3-set", t)),
    "R4": ("none", _broken_r4),
    "R5": ("unhashed", lambda c, t: _ignored_overwrite(c, t)),
    "R6": ("unhashed", lambda c, t: r6_changed_file(c, "R6", t)),
    "R7": ("none", lambda c, t: reuse_problems(c.run(c.data.build(t / "d"), t / "r", model="random_kw"),
                                               c.run(c.data.build(t / "d"), t / "r", model="random_kw"))),
    "R8": ("none", _broken_r8),
    "R9": ("none", _broken_r9),
    "R10": ("none", _broken_r10),
    "R11": ("ignores_limit", lambda c, t: r11_limit(c, "R11", t)),
    "R12": ("none", lambda c, t: _broken_r12(c, t)),
}


def _broken_r12(case: Case, tmp: Path) -> list[str]:
    """A road that answers a request from what its last run returned (as a receipt that hashes the files
    it listed then, not those read now, did): the file added since goes unseen."""
    seen: dict[str, RunOutcome] = {}

    def stale(case: Case, req: RunRequest) -> RunOutcome:
        if req.output_dir not in seen:
            seen[req.output_dir] = ROADS["run"](case, req)
            return seen[req.output_dir]
        return dataclasses.replace(seen[req.output_dir], skipped=True)
    return r12_read_when_present(case, "R12", tmp, {"stale": stale})


def _ignored_overwrite(case: Case, tmp: Path) -> list[str]:
    """--overwrite that is not passed on: a task whose changed data goes unseen is reused, stale."""
    root, _ = case.base()
    out = tmp / "res"
    case.run(root, out, tmp / "c")
    change(root / "colours.jsonl")
    try:
        return fresh_problems(case.run(root, tmp / "fresh", tmp / "fc"), case.run(root, out, tmp / "c"))
    finally:
        case._base = None


CASE_TASK = {"R4": "negbench_mcq_coco", "R9": "sugarcrepe_add_att", "R12": "flickr30k_negated"}  # checks that need a registered task's runs


@pytest.mark.parametrize("relation", sorted(BROKEN, key=lambda r: int(r[1:])))
def test_each_relation_can_fail(relation: str, tmp_path: Path) -> None:
    bug, check = BROKEN[relation]
    name = CASE_TASK.get(relation)
    case = (Case(name, data_for(name), host(), tmp_path / "case") if name else
            Case(f"buggy_{bug}", _buggy_data(), buggy_host(), tmp_path / "case"))
    assert check(case, tmp_path / "check") != []
    if relation in ("R1", "R2", "R3", "R11"):  # the same check passes on the task without the bug
        fixed = Case("buggy_none", case.data, buggy_host(), tmp_path / "fixed")
        assert check(fixed, tmp_path / "check_fixed") == []


def test_a_main_score_no_group_reaches_is_refused(tmp_path):
    """aro_vg_attribution's main score is the mean over attribute pairs of 25 or more rows: on data with
    none, the run is refused naming it (a record with a null main score once entered the board)."""
    case = Case("aro_vg_attribution", data_for("aro_vg_attribution"), host(), tmp_path)
    with pytest.raises(UserError, match="main score 'macro_accuracy'"):
        case.base()
