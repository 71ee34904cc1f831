"""Texts tokenised off the critical path: the runner's text loop encodes batch k while a thread prepares
batch k+1 (`prepared_ahead`), for a model whose `encode_prepared` is its text encoder (`encodes_prepared`).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterator, Sequence

from negharness.contracts.model import EmbeddingModel


def encodes_prepared(model: EmbeddingModel) -> bool:
    """Whether ``model.encode_prepared`` is its text encoder: no class between it and the one that defines
    `encode_prepared` overrides `encode_text` (a subclass that wraps only `encode_text` is still called),
    and no `encode_text` set on the instance itself (a wrapper that patches the model it built)."""
    own = getattr(model, "__dict__", {})
    if "encode_text" in own and "encode_prepared" not in own:
        return False
    mro = type(model).__mro__

    def owner(name: str) -> int:
        return next(i for i, cls in enumerate(mro) if name in cls.__dict__)

    return owner("encode_prepared") <= owner("encode_text")


def prepared_ahead(unique: Sequence[str], batches: list[list[int]],
                   prepare: Callable[[list[str]], Any]) -> Iterator[tuple[list[int], list[str], Any]]:
    """(positions, texts, ``prepare`` of them) per batch, the next batch prepared in a thread while the
    caller encodes this one: tokenising is CPU work the device need not wait for (the forward pass
    releases the GIL while it waits on the device). One thread, so a model's tokenizer is never
    called from two at once."""
    texts = [[unique[i] for i in idx] for idx in batches]
    if len(batches) < 2:
        yield from ((idx, t, prepare(t)) for idx, t in zip(batches, texts))
        return
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="negharness-tokenize")
    try:
        ahead = pool.submit(prepare, texts[0])
        for k, idx in enumerate(batches):
            prepared = ahead.result()
            if k + 1 < len(batches):
                ahead = pool.submit(prepare, texts[k + 1])
            yield idx, texts[k], prepared
    finally:  # an error or Ctrl-C does not wait for the batch queued behind it
        pool.shutdown(wait=True, cancel_futures=True)
