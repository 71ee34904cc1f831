"""Helpers for plugin authors' tests (as pytest's ``pytester``): a fake model and a tiny task.

`KeywordModel` embeds text as a sum of fixed random word vectors and images by their mean colour
per quadrant, so similarities are predictable and no weights are needed; it counts what it encodes.
`ColourRetrievalTask` is a six-item text-to-image task that such a model solves exactly.
`run_cli` runs ``negharness ARGV`` in this process (a subprocess pays a fresh interpreter and a torch
import per call) and `run` is the library call under the same folder and environment.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import io
import json
import os
import sys
import traceback
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

import negharness
from negharness.contracts.model import EmbeddingModel, ModelOptions
from negharness.contracts.options import OptionSpec, takes_options
from negharness.contracts.task import MetricInfo, Task, TaskOptions, TaskResult
from negharness.cli.main import main
from negharness.discovery.hookspecs import hookimpl
from negharness.discovery.lookup import PluginLookup
from negharness.discovery.manager import PluginHost, make_host
from negharness.discovery.registry import Registrar, Registry
from negharness.io.media import MediaSet
from negharness.records.schema import record_files
from negharness.scoring.metrics import Relevance, best_relevant_rank, retrieval_metrics
from negharness.scoring.perquery import per_query

COLOURS = {"red": (255, 0, 0), "green": (0, 255, 0), "blue": (0, 0, 255),
           "yellow": (255, 255, 0), "cyan": (0, 255, 255), "magenta": (255, 0, 255)}


def _word_vector(word: str, dim: int) -> torch.Tensor:
    seed = int.from_bytes(hashlib.sha1(word.encode()).digest()[:4], "little")
    return torch.from_numpy(np.random.default_rng(seed).standard_normal(dim).astype(np.float32))


class KeywordModel(EmbeddingModel):
    """Texts: colour words map onto the RGB axes, other words add small noise. Images: mean RGB."""

    name = "keyword_model"

    def __init__(self, dim: int = 8) -> None:
        super().__init__()
        self.dim = dim
        self.encoded = {"text": 0, "image": 0}

    def modules(self) -> list[torch.nn.Module]:
        return []  # no torch modules: nothing to move to a device

    def describe(self) -> dict[str, Any]:
        return {"arch": "keyword", "dim": self.dim}

    def preprocess_image(self, image: Any) -> torch.Tensor:
        return torch.from_numpy(np.asarray(image, dtype=np.float32)).permute(2, 0, 1) / 255.0

    def encode_text(self, texts: Sequence[str]) -> torch.Tensor:
        self.encoded["text"] += len(texts)
        out = torch.zeros(len(texts), self.dim)
        for i, text in enumerate(texts):
            for word in text.lower().split():
                if word in COLOURS:
                    out[i, :3] += torch.tensor(COLOURS[word], dtype=torch.float32) / 255.0
                else:
                    out[i] += 0.01 * _word_vector(word, self.dim)
        return F.normalize(out, dim=-1)

    def encode_image(self, pixels: torch.Tensor) -> torch.Tensor:
        self.encoded["image"] += pixels.shape[0]
        out = torch.zeros(pixels.shape[0], self.dim)
        out[:, :3] = pixels.float().mean(dim=(2, 3))
        return F.normalize(out + 1e-6, dim=-1)


@takes_options({"dim": OptionSpec(int, 8, "embedding size", minimum=3)})
def keyword_model(options: ModelOptions) -> KeywordModel:
    return KeywordModel(options.values["dim"])


def solid_image(colour: str, size: int = 8) -> np.ndarray:
    return np.broadcast_to(np.array(COLOURS[colour], dtype=np.uint8), (size, size, 3)).copy()


class ColourRetrievalTask(Task):
    """Six solid-colour images, one caption each ("a red picture"); R@1 is 100 for KeywordModel."""

    name = "colour_retrieval"
    family = "testing"
    modalities = frozenset({"text", "image"})
    main_score = "R@1"
    metric_info = {"R@1": MetricInfo(True, ".1f"), "MIR": MetricInfo(True, ".3f")}
    leaderboard_metrics = ("R@1", "MIR")
    description = "six solid colours, one caption each"

    def __init__(self, options: TaskOptions) -> None:
        super().__init__(options)
        self.colours = list(COLOURS)[: options.limit or None]

    def evaluate(self, ctx: Any) -> TaskResult:

        images = [solid_image(c) for c in self.colours]
        media = MediaSet("testing/colours", "image", list(self.colours), lambda i: images[i], cheap=True)
        sim = ctx.embed_texts([f"a {c} picture" for c in self.colours]) @ ctx.embed_media(media).t()
        ranks = best_relevant_rank(sim, Relevance.from_lists([[i] for i in range(len(images))], len(images)))
        metrics = retrieval_metrics(ranks, ks=(1,))
        # one value per query whose mean is the metric, as every task gives: intervals, `leaderboard --check`
        values = {"R@1": (ranks <= 1).double() * 100, "MIR": 1 / ranks.double()}
        return TaskResult({k: metrics[k] for k in ("R@1", "MIR")}, {"images": len(images)},
                          per_query=per_query(list(self.colours), values))


def host_with_models(models: dict[str, Any], name: str = "inline") -> PluginHost:
    """The installed plugins plus ``models`` (name -> factory), registered as one more plugin would be."""
    import types


    host = make_host()

    @hookimpl
    def negharness_register_models(registry: Registrar) -> None:
        for model_name, factory in models.items():
            registry.add(model_name, factory, f"{model_name} (registered by {name})")

    host.register(types.SimpleNamespace(negharness_register_models=negharness_register_models), name)
    return host


def lookup(**kinds: dict[str, Any]) -> PluginLookup:
    """A `negharness.api.PluginLookup` over only the given factories, by kind and name, e.g.
    ``lookup(model={"clip": my_factory}, trainset={"shapes": shapes})``: a trainer or task under
    test then makes exactly these plugins, the way a run makes installed ones."""

    registry = Registry()
    for kind, factories in kinds.items():
        for name, factory in factories.items():
            registry.add(kind, name, factory, f"{name} (testing)", "testing")
    return PluginLookup(registry)


def random_open_clip(folder: Path, config: str) -> list[str]:
    """open_clip's bundled ``config`` (e.g. "ViT-B-32") with random weights (seed 0), written to
    ``folder`` as a config file and a safetensors checkpoint; returns the ``negharness run`` options
    that load them. Every process given these options gets the same model, and nothing is downloaded."""
    import open_clip
    from safetensors.torch import save_file

    cfg = json.loads((Path(open_clip.__file__).parent / "model_configs" / f"{config}.json").read_text())
    arch, weights = folder / f"{config}.json", folder / f"{config}-random.safetensors"
    arch.write_text(json.dumps(cfg))
    torch.manual_seed(0)
    model = open_clip.model.CLIP(**cfg)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(weights))
    return ["--model", "clip", "--arch", str(arch), "--checkpoint", str(weights)]


# the CLI in this process --------------------------------------------------------------------------
@dataclass
class CliResult:
    """What a `negharness` command left: its exit code and output, as `subprocess.CompletedProcess`
    names them, and the record files it wrote or rewrote."""

    returncode: int
    stdout: str
    stderr: str
    records: list[Path] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return self.returncode


@contextlib.contextmanager
def isolated(cwd: Path | str | None = None, env: Mapping[str, str | None] | None = None,
             paths: Sequence[Path | str] = ()) -> Iterator[Path]:
    """Run the body in ``cwd`` with ``env`` applied (None unsets a variable) and ``paths`` first on
    sys.path, as a fresh process would see them; all three are restored afterwards, and the modules
    the body imported from ``paths`` (plugins found by their entry points) are forgotten, so one
    test's plugin never answers in another's run (modules imported before are left as they were)."""
    old_cwd, old_env, old_path, old_modules = os.getcwd(), dict(os.environ), list(sys.path), set(sys.modules)
    extra = [str(Path(p).resolve()) for p in paths]
    try:
        if cwd is not None:
            os.chdir(cwd)
        for key, value in (env or {}).items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        sys.path[:0] = extra
        importlib.invalidate_caches()
        yield Path.cwd()
    finally:
        os.chdir(old_cwd)
        os.environ.clear()
        os.environ.update(old_env)
        sys.path[:] = old_path
        _forget_modules_under(extra, keep=old_modules)
        importlib.invalidate_caches()


def _forget_modules_under(folders: Sequence[str], keep: set[str]) -> None:
    """Drop the modules whose file lies under ``folders`` from sys.modules, but those named in ``keep``."""
    if not folders:
        return
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None) if name not in keep else None
        if file and any(os.path.abspath(file).startswith(folder + os.sep) for folder in folders):
            del sys.modules[name]


def _output_dir(argv: Sequence[str]) -> Path:
    """The folder ``run`` writes records to: its --output-dir, else results/ (relative to the cwd)."""
    for i, arg in enumerate(argv):
        if arg == "--output-dir" and i + 1 < len(argv):
            return Path(argv[i + 1])
        if arg.startswith("--output-dir="):
            return Path(arg.split("=", 1)[1])
    return Path("results")


def _record_stamps(folder: Path) -> dict[Path, tuple[int, int]]:
    out = {}
    for path in record_files(folder) if folder.is_dir() else []:
        st = path.stat()
        out[path.resolve()] = (st.st_mtime_ns, st.st_size)
    return out


def _call_main(argv: list[str]) -> int:
    """``main(argv)`` with what the interpreter does around a script: SystemExit's code, and an
    uncaught exception's traceback on stderr with exit code 1. ``main(argv)``, not the console
    script's wrapper: that one ends the process."""
    try:
        return int(main(argv) or 0)
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return int(exc.code or 0)
        print(exc.code, file=sys.stderr)
        return 1
    except Exception:  # noqa: BLE001 -- what an uncaught exception does to a process: traceback, exit 1
        traceback.print_exc()
        return 1


def _fresh_process_warnings() -> None:
    """The warning filters of a fresh interpreter, so a warning the test process already showed
    (Python shows each once per place) is shown again, as a user's next command would show it."""
    warnings.resetwarnings()
    warnings.simplefilter("default")
    for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
        warnings.simplefilter("ignore", category)


def run_cli(argv: Sequence[str], *, cwd: Path | str | None = None, env: Mapping[str, str | None] | None = None,
            paths: Sequence[Path | str] = ()) -> CliResult:
    """``negharness ARGV`` in this process, as the console script would run it in ``cwd`` with
    ``env`` (and plugin folders ``paths`` on sys.path): its exit code, stdout, stderr and the
    records it wrote. Commands that start other processes (``train --nproc``) print there, not here."""
    argv = [str(a) for a in argv]
    out, err = io.StringIO(), io.StringIO()
    with isolated(cwd, env, paths) as folder, warnings.catch_warnings():
        _fresh_process_warnings()
        results = folder / _output_dir(argv)
        before = _record_stamps(results)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = _call_main(argv)
        after = _record_stamps(results)
    written = [p for p, stamp in after.items() if before.get(p) != stamp]
    return CliResult(code, out.getvalue(), err.getvalue(), written)


def run(model: str, tasks: str | list[str], *, cwd: Path | str | None = None,
        env: Mapping[str, str | None] | None = None, paths: Sequence[Path | str] = (), **options: Any) -> list[Any]:
    """`negharness.run` (the library call) in ``cwd`` with ``env`` and plugin folders ``paths``,
    restored afterwards as `run_cli` restores them; returns its `RunOutcome` list."""
    with isolated(cwd, env, paths):
        return negharness.run(model, tasks, **options)
