"""The run context protocol: what every protocol's context (embedding retrieval/MCQ, editing)
shares — the model under test, other plugins by kind and name, counters, notes and the seed.

The host builds the contexts (`negharness.engine`); plugins and tasks see them only through these
types. ``plugins`` is any `PluginSource`: the run's lookup, or `negharness.api.installed_plugins()`.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any, Protocol, Sequence

from negharness.contracts.plugin_source import PluginSource, require_plugins

if TYPE_CHECKING:
    import torch

    from negharness.contracts.media_set import MediaSet
    from negharness.contracts.model import ChoiceScorer, EmbeddingModel
    from negharness.contracts.sampling import FrameSampling

__all__ = ["Counters", "EvalContext", "PluginSource", "RunContext", "require_plugins"]


class Counters(Counter[str]):
    """One tally type for every protocol: ``ctx.counters["edited"] += 1`` or ``ctx.counters.media_encoded``."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return self[name]

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value


class RunContext:
    """What every protocol's context has: the model under test, other plugins, counters and notes."""

    def __init__(self, model: Any, plugins: PluginSource | None = None, seed: int = 0) -> None:
        self.model = model
        self.seed = seed
        self.counters = Counters()
        self.notes: dict[str, Any] = {}
        self._plugins = plugins

    def plugin(self, kind: str, name: str, options: Any = None) -> Any:
        """Another plugin of this run (a detector, a reference model), created once per run."""
        return require_plugins(self._plugins, f"ctx.plugin({kind!r}, {name!r})").plugin(kind, name, options)


class EvalContext(Protocol):
    """What a retrieval or choice task receives: the model under test and its cached, batched
    embeddings. The host's implementation (`negharness.engine.runner.CachedEvalContext`) serves what
    the cache holds and encodes only the rest, under the run's device, precision and batch size."""

    # what the host passes: an encoder, or a model that scores choice tasks itself (its ``embed_*``
    # refuse the latter); narrow with ``isinstance`` before calling an encoder's own methods
    model: "EmbeddingModel | ChoiceScorer"
    seed: int
    counters: Counters
    notes: dict[str, Any]
    log_samples: bool
    broken: dict[str, list[str]]
    batch_size: int
    precision: str

    def embed_texts(self, texts: Sequence[str]) -> "torch.Tensor":
        """(len(texts), D) L2-normalised float32 embeddings, in the order given (duplicates once)."""

    def embed_media(self, media: "MediaSet") -> "torch.Tensor":
        """(len(media), D) L2-normalised float32 embeddings; a row of an item that could not be read
        (with ``--skip-broken-media``) is NaN and its id is in ``broken``."""

    def frame_sampling(self, task_default: "FrameSampling") -> "FrameSampling":
        """The model's frame sampling where the user chose one (``-M frames=``), else the task's."""

    def plugin(self, kind: str, name: str, options: Any = None) -> Any:
        """Another plugin of this run by kind and name, created once per run."""
