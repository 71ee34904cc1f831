"""The `negharness` parser: every command, its options and help, one spelling of each run setting
(`RUN_SETTINGS`) for every command that loads a model."""

from __future__ import annotations

import argparse
from typing import Any

from negharness.contracts.precision import PRECISION_NAMES
from negharness.cli.commands import LIST_KINDS, cmd_fetch, cmd_list, cmd_run, cmd_train
from negharness.cli.reports import (
    cmd_build_queries,
    cmd_compare,
    cmd_diagnose,
    cmd_export,
    cmd_fire,
    cmd_leaderboard,
)
from negharness.version import __version__

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


class InOrder(argparse.Action):
    """Keeps the option as argparse would (the last value, or all of them for ``append``) and also its place
    among the others (``namespace.model_order``): `negharness run` gives each ``--model`` the model options
    written after it, and every model those written before the first."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        order = list(getattr(namespace, "model_order", None) or [])
        order.append((self.dest, values))
        namespace.model_order = order
        if self.const == "append":
            setattr(namespace, self.dest, [*(getattr(namespace, self.dest, None) or []), values])
        else:
            setattr(namespace, self.dest, values)


def _model_options(p: argparse.ArgumentParser, in_order: bool = False) -> None:
    """The options every model plugin shares; ``in_order``: each kept with its place (`InOrder`)."""
    one: dict[str, Any] = {"action": InOrder} if in_order else {}
    many: dict[str, Any] = {"action": InOrder, "const": "append"} if in_order else {"action": "append"}
    scope = " (after a --model: that model's; before the first: every model's)" if in_order else ""
    g = p.add_argument_group("model options (shared by every model plugin)" + scope)
    g.add_argument("--arch", help="architecture name or config file (e.g. ViT-B-32, path/to/config.json)", **one)
    g.add_argument("--pretrained", help="pretrained tag (e.g. openai, laion400m_e31)", **one)
    g.add_argument("--checkpoint", help="local checkpoint file (safetensors or weights-only torch file)", **one)
    g.add_argument("-M", "--model-arg", metavar="KEY=VALUE",
                   help="plugin-specific model option, repeatable (e.g. -M quick_gelu=true)", **many)


# The run settings, one spelling and one help for every command that loads a model; each command
# takes those its protocol honours (a setting it would only record is not offered).
RUN_SETTINGS: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "device": (("--device",), {"default": "auto", "help": "auto | cpu | cuda | cuda:N (default auto)"}),
    "precision": (("--precision",), {"default": "fp32", "choices": list(PRECISION_NAMES),
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


def _record_memo(p: argparse.ArgumentParser) -> None:
    """--cache-dir for a command that reads records: where their per-query check is remembered."""
    p.add_argument("--cache-dir", help="cache root, where each record's interval check is remembered "
                                       "(else $NEGHARNESS_CACHE, else ~/.cache/negharness)")


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
    parser.add_argument("--profile", metavar="FILE",
                        help="write a cProfile of the command, every thread, to FILE (pstats format); "
                             "also $NEGHARNESS_PROFILE=FILE")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("list", help="every model, task and trainer, with the plugin that gave it and its options")
    p.add_argument("pattern", nargs="?", metavar="PATTERN",
                   help="only names matching this glob ('sugarcrepe_*') or, without * ? [, holding this text")
    p.add_argument("--kind", choices=LIST_KINDS, help="only this kind of plugin entry")
    _include_path(p)
    p.add_argument("--brief", action="store_true",
                   help="names and descriptions only: no plugin module is imported (instant, no torch)")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("fetch", help="download the files tasks read (pinned, SHA-256 checked, resumable) into the "
                                     "data root")
    p.add_argument("pattern", nargs="*", metavar="TASK|GLOB|BENCHMARK|MODEL",
                   help="task name or glob ('sugarcrepe_*'), benchmark (negbench, aro, ...), source name, a model "
                        "with released weights (negclip: into <cache>/models/), or clip / hf_clip (hub weights, with "
                        "--arch/--pretrained: into the Hugging Face cache)")
    p.add_argument("--jobs", type=int, default=4, help="files downloaded at once (default 4)")
    p.add_argument("--list", action="store_true", help="show the sources (size, checksum, in place?) and fetch nothing")
    p.add_argument("--sources", metavar="FILE", help="a JSON list of sources to use instead of the built-in table "
                                                    "(a mirror, private data)")
    p.add_argument("--arch", help="with clip: the open_clip architecture (default ViT-B-32); with hf_clip: the hub "
                                  "model id (default openai/clip-vit-base-patch32): into the Hugging Face cache")
    p.add_argument("--pretrained", help="with clip: the open_clip pretrained tag (default openai)")
    _include_path(p)
    _run_settings(p, "data_root", "cache_dir")  # released weights go to <cache>/models/
    p.set_defaults(func=cmd_fetch)

    p = sub.add_parser("run", help="evaluate a model on tasks", epilog=EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, action=InOrder, const="append",
                   help="model name (see `negharness list`); repeat for several models, each run in order on "
                        "the same tasks, sharing the caches (--model a --model b -M base=a)")
    p.add_argument("--task", required=True, action="append", help="task name or glob, repeatable ('shapes_*')")
    _model_options(p, in_order=True)
    _include_path(p)
    p.add_argument("-T", "--task-arg", action="append", metavar="KEY=VALUE", help="task option, repeatable")
    p.add_argument("--judge", metavar="NAME", help="the judge of judged tasks (simpleneg): a vision-language "
                   "model plugin, `negharness list --kind judge` (e.g. hf_vlm_judge, openai_judge)")
    p.add_argument("-J", "--judge-arg", action="append", metavar="KEY=VALUE",
                   help="judge option, repeatable (-J arch=Qwen/Qwen3-VL-4B-Instruct, -J url=http://127.0.0.1:8000/v1)")
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
    _record_memo(p)
    p.set_defaults(func=cmd_leaderboard)

    p = sub.add_parser("export", help="result records -> MTEB, lm-eval or Every Eval Ever files (docs/guides/exports.md)")
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
    _include_path(p)
    p.add_argument("-T", "--task-arg", action="append", metavar="KEY=VALUE", help="task option, repeatable")
    p.add_argument("--sizes", help="query counts N to resample (default: those of 500,1000,3000 the task has, "
                   "else a quarter, half and all of its queries)")
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
    _record_memo(p)
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
                  precision={"default": None, "choices": ["auto", *PRECISION_NAMES],
                             "help": "as for run (default: the trainer's, auto: bf16 on GPUs, fp32 on CPUs)"},
                  batch_size={"default": None, "help": "training batch size (default: the trainer's, 64)"},
                  workers={"help": "DataLoader worker processes (default: min(8, CPUs - 1))"},
                  data_root={"help": "where training data lives or is generated (as for run)"})
    p.add_argument("--max-steps", type=int, help="stop after this many optimizer steps (resumable)")
    p.add_argument("--limit", type=int, help="use only the first N items of each training set stream")
    p.add_argument("--nproc", type=int, help="train on N processes (DDP) by re-launching under torchrun")
    p.set_defaults(func=cmd_train, argv=None)
    return parser
