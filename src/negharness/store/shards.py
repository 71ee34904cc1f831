"""Cache shards on disk: one safetensors file of a collection's rows, its ids and checksum in the header.

A shard is written atomically (a temporary file beside it, then a rename) and checked on read: its
checksum covers the ids, the shape and the float32 bytes, and it names the collection it belongs to, so
a damaged shard or one copied from another model's folder is refused (`DamagedShard`, `ForeignShard`).
A writer killed mid-write leaves its temporary file; `remove_orphans` takes those of dead processes away.
The cache built on shards (buffering, merging, claims) is `negharness.store.cache`.
"""

from __future__ import annotations

import json
import math
import os
import re
import socket
import time
import zlib
from pathlib import Path
from typing import Sequence

import torch

from negharness.io.atomic_files import atomic_write

FORMAT = "negharness-shard-v4"  # v4: CRC-32 checksum; v3: SHA-256; v3 and up name their collection folder
OLD_FORMATS = ("negharness-shard-v2", "negharness-shard-v3")  # kept apart by the namespace (runner's CACHE_KEYS)
HOST = re.sub(r"[^A-Za-z0-9_.-]", "_", socket.gethostname())[:64] or "host"


def shard_owner(path: Path) -> str:
    """The collection a shard belongs to: its folder and the namespace folder above it (both hashes
    of what made the embeddings), so a shard copied into another model's folder is not read there."""
    return f"{path.parent.parent.name}/{path.parent.name}"


def shard_checksum(ids_json: str, emb: torch.Tensor | Sequence[torch.Tensor], owner: str = "") -> str:
    """CRC-32 of the owner, the ids, the shape and the float32 bytes. It guards against damage (a
    torn write, a flipped bit, a swapped row: missed once in 2^32), at a third of the SHA-256 that
    v3 used, whose stronger guarantee bought nothing here: neither stops a deliberate edit. ``emb``
    may be the table's parts, one under the other (a merge writes its shards' tables without stacking)."""
    tables = _parts(emb)
    parts = [owner.encode("utf-8") + b"\0", ids_json.encode("utf-8"), str(_shape(tables)).encode()]
    crc = 0
    for part in parts:
        crc = zlib.crc32(part, crc)
    for table in tables:
        crc = zlib.crc32(table.contiguous().numpy().data.cast("B"), crc)
    return f"{crc:08x}"


def _parts(emb: torch.Tensor | Sequence[torch.Tensor]) -> list[torch.Tensor]:
    return [emb] if isinstance(emb, torch.Tensor) else list(emb)


def _shape(tables: Sequence[torch.Tensor]) -> tuple[int, ...]:
    """The shape of ``tables`` (2-D, one width) one under the other; one table's own shape."""
    if len(tables) == 1:
        return tuple(tables[0].shape)
    if len({t.shape[1] for t in tables}) != 1 or any(t.ndim != 2 for t in tables):
        raise ValueError(f"cache shard: tables of shapes {[tuple(t.shape) for t in tables]} are not one table")
    return (sum(t.shape[0] for t in tables), tables[0].shape[1])


class DamagedShard(Exception):
    """A shard whose bytes do not match its checksum (or cannot be parsed)."""


class ForeignShard(DamagedShard):
    """A sound shard that is not this collection's: written for another model or collection (copied
    or moved here), or by an older negharness whose shards did not name their collection."""


def read_shard(path: Path) -> tuple[list[str], torch.Tensor]:
    """(ids, embeddings) of a shard whose checksum matches; `DamagedShard` otherwise.
    A shard that vanished (merged by another process) raises FileNotFoundError."""
    from safetensors import SafetensorError
    from safetensors.torch import load

    data = path.read_bytes()
    try:
        header_len = int.from_bytes(data[:8], "little")
        meta = json.loads(data[8:8 + header_len]).get("__metadata__") or {}
        emb = load(data)["emb"]
    except (SafetensorError, ValueError, KeyError, AttributeError) as exc:
        raise DamagedShard(f"unreadable ({type(exc).__name__})") from exc
    if meta.get("format") in OLD_FORMATS:
        raise ForeignShard("written by an older negharness, before shards named their model and collection")
    if meta.get("format") != FORMAT or "ids" not in meta or "checksum" not in meta or "owner" not in meta:
        raise DamagedShard("no checksum (not written by this version)")
    if emb.dtype != torch.float32 or emb.ndim != 2:
        raise DamagedShard("not a (N, D) float32 table")
    if shard_checksum(meta["ids"], emb, meta["owner"]) != meta["checksum"]:
        raise DamagedShard("checksum mismatch")
    if meta["owner"] != shard_owner(path):
        raise ForeignShard(f"written for {meta['owner']}, another model or collection, not {shard_owner(path)}")
    try:
        ids = json.loads(meta["ids"])
    except ValueError as exc:
        raise DamagedShard("unreadable ids") from exc
    if len(ids) != emb.shape[0]:
        raise DamagedShard("ids and rows differ in number")
    return ids, emb


def write_shard(path: Path, ids: Sequence[str], emb: torch.Tensor | Sequence[torch.Tensor], sync: bool) -> None:
    """Atomically (temporary file, then rename); ``sync`` also fsyncs the file and its folder. The
    safetensors file is written here, header then the table's own bytes (safetensors' ``save`` copied
    the table twice under the GIL, a third of a shard's cost); its reader reads it (`read_shard`).
    ``emb`` may be parts of the table (a width each, rows one under the other), written in turn: no copy."""
    tables = [host_table(t) for t in _parts(emb)]
    ids_json = json.dumps(list(ids))
    owner = shard_owner(path)
    header = safetensors_header(_shape(tables), {"format": FORMAT, "owner": owner, "ids": ids_json,
                                                 "checksum": shard_checksum(ids_json, tables, owner)})

    def _write(tmp: Path) -> None:
        with open(tmp, "wb") as fh:
            fh.write(header)
            for table in tables:
                fh.write(table.numpy().data.cast("B"))
            if sync:
                fh.flush()
                os.fsync(fh.fileno())

    atomic_write(path, _write)
    if sync:
        fsync_entry(path.parent)


def safetensors_header(shape: tuple[int, ...], metadata: dict[str, str]) -> bytes:
    """The safetensors header of a file holding a float32 table of ``shape`` (as ``"emb"``) after it: its
    length (8 bytes, little-endian), then its JSON, padded with spaces to a multiple of 8 as safetensors pads."""
    info = {"__metadata__": metadata,
            "emb": {"dtype": "F32", "shape": list(shape), "data_offsets": [0, math.prod(shape) * 4]}}
    body = json.dumps(info, separators=(",", ":")).encode("utf-8")
    body += b" " * (-len(body) % 8)
    return len(body).to_bytes(8, "little") + body


def fsync_entry(path: Path) -> None:
    """Flush a file's or a folder's entries to disk (best effort: a failure only weakens durability)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def host_table(emb: torch.Tensor) -> torch.Tensor:
    """``emb`` as float32, contiguous, on the CPU, without grad: as it comes from the runner, with no torch
    call (each lets go of the GIL, and taking it back can wait a switch interval beside a busy thread)."""
    if emb.dtype == torch.float32 and emb.device.type == "cpu" and not emb.requires_grad and emb.is_contiguous():
        return emb
    return emb.detach().float().cpu().contiguous()


def new_shard_name() -> str:
    """Unique across the processes of one machine (pid) and of several nodes sharing a cache (host)."""
    return f"shard-{time.time_ns()}-{HOST}-{os.getpid()}.safetensors"


ORPHAN_AGE = 60.0  # seconds a temporary shard file of a dead writer is left before it is removed
_TEMPORARY = re.compile(r"^\.shard-\d+-(?P<host>[A-Za-z0-9_.-]+)-(?P<pid>\d+)\.safetensors\.[^.]+\.tmp$")


def remove_orphans(folder: Path) -> list[Path]:
    """Remove the temporary shard files (`write_shard`'s, before their rename) that a process killed
    mid-write left in ``folder``: those written on this host by a process no longer running, over
    `ORPHAN_AGE` old (a merge's file holds up to a whole pass's rows: tens of MB each). Another host's
    are left to it (its pids are not ours to test); so are those of a container that shares this host's
    name and the cache but not its process ids, while its writer wrote within `ORPHAN_AGE` (a writer
    stalled longer would find its file gone and fail its rename). Returns what was removed."""
    removed = []
    for tmp in folder.glob(".shard-*.tmp"):
        match = _TEMPORARY.match(tmp.name)
        if match is None or match["host"] != HOST or _running(int(match["pid"])):
            continue
        try:
            if time.time() - tmp.stat().st_mtime < ORPHAN_AGE:
                continue
            tmp.unlink()
        except OSError:
            continue  # gone meanwhile, or not ours to remove
        removed.append(tmp)
    return removed


def _running(pid: int) -> bool:
    """Whether a process ``pid`` runs on this host (one we may not signal runs too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OverflowError, ValueError):
        return True  # no process id of this system: not ours to judge
    except PermissionError:
        return True
    return True
