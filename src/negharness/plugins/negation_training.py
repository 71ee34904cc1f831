"""Negation-aware fine-tuning: nT2VR's BNL and SNL, NegBench's CLIP + MCQ objective, and CLIP*.

One loop, trainers that differ only in their recipe's loss terms:

- ``triplet`` (CLIP*): Eq. 2, triplet loss with the hardest in-batch negative, margin m0.
- ``bnl``: Eq. 7, + lambda_v * l_bcl(x+, q, q-) + lambda_q * l_bcl(q, x+, q-) (Eq. 5-6; the paper's
  lambda_2 for both). The authors detach the video inside the auxiliary loss (``detach_video``).
- ``snl``: Eq. 4, + lambda_1 * l_tri(x+, q, q-) (``pivot=video``, Eq. 3); ``snl_query`` / ``-O
  pivot=query``: l_tri(q, x+, q-), the query as pivot (Table 5 row 3, Table 7).
- ``negbench``: alpha * L_CLIP (captions with true negations as positives) + (1 - alpha) * L_MCQ,
  alpha = 0.99 and lr 1e-8 as NegBench's released runs (``clw0.99_mlw0.01``, ``lr1e-8``), AdamW.

The training data is a registered training set (``--task shapes | msrvtt10ktrain | negbench_negfull
| captions ...``), reached through the registry. Defaults are the papers' (nT2VR: RMSprop, lr 1e-6
decayed x0.99 per epoch, batch 64, early stop after 2 epochs without a better validation MIR);
every one is an ``-O key=value`` option. Decoding runs in DataLoader workers, mixed precision and
gradient accumulation are options, and a checkpoint every N steps and at each epoch end holds
everything a killed run needs to resume exactly, on any number of ranks (`negharness.engine.distributed`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from negharness.api import OptionSpec, TrainOptions, UserError, takes_options
from negharness.api import PRECISION_NAMES
from negharness.api import check_batch_size

FORMAT = "negharness-trained-v1"


CHOICES = {"pivot": ("video", "query"), "optimizer": ("rmsprop", "adamw"), "unit": ("auto", "caption", "item"),
           "precision": ("auto", *PRECISION_NAMES)}


@dataclass
class Recipe:
    trainer: str = "triplet"
    triplet: bool = True
    m0: float = 0.2
    bnl: bool = False
    lambda_v: float = 1e-3  # weight of l_bcl(x+, q, q-)
    lambda_q: float = 1e-3  # weight of l_bcl(q, x+, q-)
    m1: float = 0.1
    m2: float = 0.6
    m3: float = 0.1
    m4: float = 0.3
    detach_video: bool = True
    snl: bool = False
    lambda_1: float = 1e-3
    pivot: str = "video"  # SNL: "video" (Eq. 3) or "query" (Table 5 row 3)
    negbench: bool = False
    alpha: float = 0.99
    negbench_weight: float = 1.0
    optimizer: str = "rmsprop"  # rmsprop (nT2VR) | adamw (NegBench / open_clip)
    lr: float = 1e-6
    weight_decay: float = 0.0
    lr_decay: float = 0.99
    batch_size: int = 64
    epochs: int = 10
    patience: int = 2
    accumulate: int = 1
    steps_per_epoch: int = 0  # 0: one pass over the training samples
    unit: str = "auto"  # caption: every (item, caption) pair once per epoch (nT2VR authors); item: one per item;
    # auto: the training set's choice (caption for real data; item for the embedded world, as before)
    precision: str = "auto"  # auto (bf16 on GPUs, fp32 on CPUs) | bf16 | fp16 | fp32
    grad_checkpointing: bool = False
    checkpoint_every: int = 500  # optimizer steps between checkpoints (and one at each epoch end)
    log_every: float = 10.0  # seconds between log lines where no progress bar shows
    seed: int = 0

    @classmethod
    def defaults(cls, trainer: str, seed: int = 0) -> "Recipe":
        """The papers' recipe for ``trainer`` before any option."""
        base = cls(trainer=trainer, bnl=trainer == "bnl", snl=trainer in ("snl", "snl_query"),
                   negbench=trainer == "negbench", triplet=trainer != "negbench", seed=seed,
                   pivot="query" if trainer == "snl_query" else "video")
        if trainer == "negbench":
            base = dataclasses.replace(base, lr=1e-8, optimizer="adamw", lr_decay=1.0)
        return base

    @classmethod
    def from_options(cls, trainer: str, opts: TrainOptions) -> "Recipe":
        """``trainer``'s recipe: its defaults, the ``-O`` values as bound to `recipe_options` (the
        trainer's `takes_options`), then --precision and --batch-size."""
        flags = {k: v for k, v in (("precision", opts.precision), ("batch_size", opts.batch_size)) if v is not None}
        recipe = dataclasses.replace(cls.defaults(trainer, opts.seed), **{**opts.values, **flags})
        if recipe.precision not in CHOICES["precision"]:
            raise UserError(f"--precision {recipe.precision}: choose one of {', '.join(CHOICES['precision'])}")
        check_batch_size(recipe.batch_size)
        if recipe.accumulate < 1:
            raise UserError("-O accumulate: must be at least 1")
        return recipe


def recipe_options(trainer: str, base: Recipe | None = None) -> dict[str, OptionSpec]:
    """Every recipe field is an ``-O`` option, typed by its default, through the one option parser;
    the seed, precision and batch size are flags (``--seed``, ``--precision``, ``--batch-size``),
    spelled as for `run`."""
    base = base or Recipe.defaults(trainer)
    return {f.name: OptionSpec(type(getattr(base, f.name)), getattr(base, f.name), choices=CHOICES.get(f.name, ()))
            for f in dataclasses.fields(Recipe) if f.name not in ("trainer", *TrainOptions.AS_FLAGS)}


TRAINERS = ("bnl", "snl", "snl_query", "negbench", "triplet")
# each trainer's -O options, declared in this module (no torch): its registration names the declaration
# (`negharness.plugins.trainers`), so `negharness train` checks -O before torch; its factory is decorated with it
BNL, SNL, SNL_QUERY, NEGBENCH, TRIPLET = (takes_options(recipe_options(name)) for name in TRAINERS)
DECLARED = dict(zip(TRAINERS, (BNL, SNL, SNL_QUERY, NEGBENCH, TRIPLET)))
