"""What a trainer plugin receives, and what a training-set plugin gives.

A trainer factory takes `TrainOptions` and returns the output folder. A training set ("trainset",
registered like a task: ``msrvtt10ktrain``, ``negbench_negfull``, ``shapes``) is a factory taking
`TrainSetOptions` and returning a `TrainingSet`: streams of media with captions and whatever the
negation losses need (soft negatives, true negations, MCQs), plus an optional validation stream.
Media are loaded lazily by index (``load(i)``), so decoding runs in DataLoader workers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, TypeVar

from negharness.contracts.plugin_source import PluginSource, require_plugins
from negharness.contracts.errors import UnknownNameError, UserError
from negharness.contracts.model import ModelOptions
from negharness.contracts.options import BindsOptions, OptionSpec, frozen_empty, takes_options
from negharness.contracts.sampling import FrameSampling

Mcq = tuple[tuple[str, ...], int]  # (options, index of the correct one)


T = TypeVar("T")


@dataclass
class TrainStream:
    """One kind of media with its text. Lists are per item; ``None`` means "this stream has none".

    ``groups``: items with equal group ids are indistinguishable (all positives of each other's
    captions); default: every item its own group. ``negated``: per caption its soft negative q- or
    None (nT2VR). ``true_negations``: captions that mention what is absent and stay true (NegBench's
    CLIP positives). ``mcq``: per item an MCQ or None.
    """

    name: str
    kind: str  # "image" | "video"
    ids: list[str]
    load: Callable[[int], Any]  # raw item: PIL image / uint8 (H, W, 3) or frames (T, H, W, 3)
    captions: list[list[str]]
    groups: list[str] | None = None
    negated: list[list[str | None]] | None = None
    true_negations: list[list[str]] | None = None
    mcq: list[Mcq | None] | None = None
    contrastive: bool = True  # False: MCQ rows only (NegBench's NegMCQ batches get only the MCQ loss)

    def __post_init__(self) -> None:
        if self.kind not in ("image", "video"):
            raise ValueError(f"stream {self.name}: kind must be image or video")
        n = len(self.ids)
        for name in ("captions", "groups", "negated", "true_negations", "mcq"):
            value = getattr(self, name)
            if value is not None and len(value) != n:
                raise ValueError(f"stream {self.name}: {name} has {len(value)} entries for {n} items")
        if self.groups is None:
            self.groups = list(self.ids)

    def __len__(self) -> int:
        return len(self.ids)

    def subset(self, positions: Sequence[int]) -> "TrainStream":
        """The first items only (``--limit``), loading through the original indices."""
        pos = list(positions)
        load = self.load

        def pick(xs: list[T] | None) -> list[T] | None:
            return None if xs is None else [xs[i] for i in pos]

        return TrainStream(self.name, self.kind, [self.ids[i] for i in pos], lambda i: load(pos[i]),
                           [self.captions[i] for i in pos], pick(self.groups), pick(self.negated),
                           pick(self.true_negations), pick(self.mcq), self.contrastive)


@dataclass
class TrainingSet:
    name: str
    streams: list[TrainStream]
    val: TrainStream | None = None  # validation (original captions): MIR picks the epoch, stops early
    data_hash: str = ""  # content hash of the text files read (and media listing), for the record
    notes: list[str] = field(default_factory=list)
    unit: str = "caption"  # what an epoch iterates by default: every (item, caption) pair, or every item


@dataclass
class TrainSetOptions(BindsOptions):
    """What a training-set factory receives; the host binds ``-T`` to the options the set declares
    (`named_trainset`'s ``options``), so the set reads typed ``values``."""

    FLAG = "-T"
    OWNER = "training set"
    data_root: Path
    extra: dict[str, str] = field(default_factory=dict)  # -T key=value
    seed: int = 0
    sampling: FrameSampling | None = None  # the model's choice (-M frames=...), else the set's default
    cache_dir: Path | None = None
    values: Mapping[str, Any] = field(default_factory=frozen_empty, compare=False, repr=False)
    rest: Mapping[str, str] = field(default_factory=frozen_empty, compare=False, repr=False)
    bound: bool = field(default=False, compare=False, repr=False)


def named_trainset(name: str, build: Callable[[str, TrainSetOptions], TrainingSet],
                   options: Mapping[str, OptionSpec] | None = None) -> Callable[[TrainSetOptions], TrainingSet]:
    """The factory a training-set entry point names: one builder serves several sets by name. With
    ``options``, the set declares its ``-T`` options (`takes_options`): ``build`` reads them bound."""
    def factory(options_: TrainSetOptions) -> TrainingSet:
        return build(name, options_)

    factory.__name__ = name
    return takes_options(options)(factory) if options is not None else factory


@dataclass
class TrainOptions(BindsOptions):
    """What a trainer factory receives; the host binds ``-O`` to the options the trainer declares
    (`takes_options`), so the trainer reads typed ``values``. ``--seed``, ``--precision`` and
    ``--batch-size`` are flags, spelled as for `run`: ``-O precision=...`` is refused, naming the flag."""

    FLAG = "-O"
    OWNER = "trainer"
    AS_FLAGS = {"seed": "--seed", "precision": "--precision", "batch_size": "--batch-size",
                # the training set's options, once also taken as -O (before 0.2)
                "n_train": "-T n_train=N", "n_val": "-T n_val=N", "world_seed": "-T world_seed=N"}
    out: Path
    model: str | None = None
    model_options: ModelOptions = field(default_factory=ModelOptions)
    task: str | None = None
    task_extra: dict[str, str] = field(default_factory=dict)
    seed: int = 0
    device: str = "auto"
    cache_dir: Path | None = None
    data_root: Path | None = None
    extra: dict[str, str] = field(default_factory=dict)
    progress: Any = None
    plugins: Any = None  # the run's plugin lookup (a PluginSource); the CLI always sets it
    max_steps: int | None = None  # stop after this many optimizer steps in total (quick checks)
    limit: int | None = None  # first N items of each training stream (and of validation)
    workers: int | None = None  # DataLoader workers (default: min(8, CPUs - 1))
    log: Callable[[str], None] | None = None  # a line every few seconds where no progress bar shows
    precision: str | None = None  # --precision, spelled as for `run` (None: the trainer's default)
    batch_size: int | None = None  # --batch-size, spelled as for `run` (None: the trainer's default)
    values: Mapping[str, Any] = field(default_factory=frozen_empty, compare=False, repr=False)
    rest: Mapping[str, str] = field(default_factory=frozen_empty, compare=False, repr=False)
    bound: bool = field(default=False, compare=False, repr=False)

    @property
    def trainset(self) -> str:
        """The training set a trainer that reads one trains on: ``--task``, else the embedded world's
        (``shapes``). One rule, for the built-in trainers and for the check of ``-T`` before torch
        (`negharness.engine.precheck`, where a trainer's registration says ``reads_trainset=True``)."""
        return self.task or "shapes"

    def lookup(self) -> PluginSource:
        return require_plugins(self.plugins, "a trainer")

    def load_model(self, name: str, options: ModelOptions) -> Any:
        """A fresh model to train, made through the run's plugin lookup like every other plugin."""
        return self.lookup().create("model", name, options)

    def load_trainset(self, name: str, options: "TrainSetOptions") -> "TrainingSet":
        """A training set by name (kind ``trainset``), through the same lookup."""
        try:
            made: TrainingSet = self.lookup().create("trainset", name, options)
            return made
        except UnknownNameError as exc:
            raise UserError(f"--task {name}: not a training set ({exc}); `negharness list` shows the trainsets") from None
