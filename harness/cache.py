"""On-disk embedding cache: every text, image and video is encoded once per model fingerprint.

Layout: ``<root>/embeddings/<namespace>/<collection>/shard-*.safetensors``. The namespace hashes
everything that changes an embedding (model fingerprint, precision); the collection names where
items come from (``text`` for all texts, keyed by the text's hash, or a media collection with its
frame sampling). Shards are written atomically as encoding goes, so a run killed halfway resumes
from the shards it finished, and concurrent runs never clobber each other (unique shard names).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any, Sequence

import torch

from .atomic import atomic_write, atomic_write_json


def text_key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def _safe_name(collection: str) -> str:
    readable = "".join(c if c.isalnum() or c in "-_." else "_" for c in collection)[:60]
    return f"{readable}-{hashlib.sha1(collection.encode()).hexdigest()[:10]}"


class CollectionCache:
    """The cached embeddings of one (namespace, collection)."""

    def __init__(self, folder: Path, flush_every: int = 4096) -> None:
        self.folder = folder
        self.flush_every = flush_every
        self._index: dict[str, torch.Tensor] | None = None
        self._pending_ids: list[str] = []
        self._pending: list[torch.Tensor] = []

    def _load(self) -> dict[str, torch.Tensor]:
        if self._index is None:
            from safetensors import SafetensorError
            from safetensors.torch import load_file

            index: dict[str, torch.Tensor] = {}
            for shard in sorted(self.folder.glob("shard-*.safetensors")):
                try:
                    from safetensors import safe_open

                    with safe_open(str(shard), framework="pt") as fh:
                        ids = json.loads((fh.metadata() or {})["ids"])
                    emb = load_file(str(shard))["emb"]
                except (SafetensorError, OSError, KeyError, ValueError):
                    continue  # an unreadable shard is recomputed, never trusted
                if len(ids) != emb.shape[0]:
                    continue
                for i, key in enumerate(ids):
                    index[key] = emb[i]
            self._index = index
        return self._index

    def lookup(self, keys: Sequence[str]) -> tuple[list[int], list[torch.Tensor]]:
        """Positions of ``keys`` that are cached, and their embeddings."""
        index = self._load()
        found = [(i, index[k]) for i, k in enumerate(keys) if k in index]
        return [i for i, _ in found], [e for _, e in found]

    def add(self, keys: Sequence[str], emb: torch.Tensor) -> None:
        emb = emb.detach().float().cpu()
        index = self._load()
        for i, k in enumerate(keys):
            index[k] = emb[i]
        self._pending_ids.extend(keys)
        self._pending.append(emb)
        if len(self._pending_ids) >= self.flush_every:
            self.flush()

    def flush(self) -> None:
        if not self._pending_ids:
            return
        from safetensors.torch import save_file

        emb = torch.cat(self._pending).contiguous()
        meta = {"ids": json.dumps(self._pending_ids)}
        name = f"shard-{time.time_ns()}-{os.getpid()}.safetensors"
        atomic_write(self.folder / name, lambda tmp: save_file({"emb": emb}, str(tmp), metadata=meta))
        self._pending_ids, self._pending = [], []


class EmbeddingCache:
    """Root of the cache; `collection()` hands out per-(namespace, collection) stores."""

    def __init__(self, root: str | Path, flush_every: int = 4096) -> None:
        self.root = Path(root) / "embeddings"
        self.flush_every = flush_every
        self._open: dict[tuple[str, str], CollectionCache] = {}

    def collection(self, namespace: str, collection: str, describe: dict[str, Any] | None = None) -> CollectionCache:
        key = (namespace, collection)
        if key not in self._open:
            folder = self.root / namespace / _safe_name(collection)
            folder.mkdir(parents=True, exist_ok=True)
            info = self.root / namespace / "namespace.json"
            if describe is not None and not info.exists():
                atomic_write_json(info, describe)  # for humans: what this namespace holds
            self._open[key] = CollectionCache(folder, self.flush_every)
        return self._open[key]

    def flush(self) -> None:
        for c in self._open.values():
            c.flush()
