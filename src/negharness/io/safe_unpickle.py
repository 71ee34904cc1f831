"""Tensors out of a torch pickle that torch.load(weights_only=True) refuses, without running it.

Released checkpoints often pickle objects of their authors' classes beside the weights (nT2VR's
``.pth.tar`` keeps an ``argparse.Namespace`` and a config object). `torch.load(weights_only=True)`
refuses such files as a whole. This unpickler builds only tensors (from the file's raw storages),
plain containers and scalars; every other global a file names becomes an inert stand-in class
that records its name and is never imported or called, so a reduction that would run a command
(``os.system``) builds a stand-in instead. It reads torch's zip format (``data.pkl`` + ``data/N``)
and the legacy pre-1.6 stream format.
"""

from __future__ import annotations

import _compat_pickle
import io
import pickle
import struct
import zipfile
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import torch

_STORAGE_DTYPES = {
    "DoubleStorage": torch.float64, "FloatStorage": torch.float32, "HalfStorage": torch.float16,
    "BFloat16Storage": torch.bfloat16, "LongStorage": torch.int64, "IntStorage": torch.int32,
    "ShortStorage": torch.int16, "CharStorage": torch.int8, "ByteStorage": torch.uint8,
    "BoolStorage": torch.bool, "ComplexFloatStorage": torch.complex64,
    "ComplexDoubleStorage": torch.complex128, "UntypedStorage": torch.uint8,
}
_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C


class InertObject:
    """Stand-in for an object of a class the file names: accepts any construction, keeps nothing."""

    foreign_name = "?"

    def __new__(cls, *args: Any, **kwargs: Any) -> "InertObject":
        return object.__new__(cls)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __setstate__(self, state: Any) -> None:
        pass

    def __repr__(self) -> str:
        return f"<ignored {self.foreign_name}>"


@dataclass(frozen=True)
class _StorageType:
    dtype: torch.dtype


@dataclass
class Unpickled:
    """What came out: the object tree (tensors, containers, stand-ins) and the foreign names met."""

    obj: Any
    ignored: list[str] = field(default_factory=list)


def _rebuild_tensor(storage: torch.Tensor, offset: int, size: tuple, stride: tuple, *_: Any) -> torch.Tensor:
    return storage.as_strided(tuple(size), tuple(stride), offset)


@dataclass
class _PendingTensor:
    cell: list
    offset: int
    size: tuple
    stride: tuple

    def resolve(self) -> torch.Tensor:
        return _rebuild_tensor(self.cell[0], self.offset, self.size, self.stride)


def _rebuild_any(storage: Any, offset: int, size: tuple, stride: tuple, *rest: Any) -> Any:
    if isinstance(storage, list):  # legacy: storage bytes come after the object
        return _PendingTensor(storage, offset, tuple(size), tuple(stride))
    return _rebuild_tensor(storage, offset, size, stride)


def _rebuild_parameter(data: Any, *_: Any) -> Any:
    return data


def _rebuild_from_type(func: Any, _new_type: Any, args: tuple, _state: Any) -> Any:
    return func(*args)


def _encode(text: str, encoding: str = "latin1") -> bytes:
    """Protocol-2 pickles spell bytes as _codecs.encode(str, 'latin1'): the only call allowed."""
    if encoding not in ("latin1", "latin-1"):
        raise pickle.UnpicklingError(f"_codecs.encode with encoding {encoding!r}")
    return text.encode("latin1")


_ALLOWED: dict[tuple[str, str], Any] = {
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_any,
    ("torch._utils", "_rebuild_tensor"): _rebuild_any,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter,
    ("torch._tensor", "_rebuild_from_type_v2"): _rebuild_from_type,
    ("collections", "OrderedDict"): OrderedDict,
    ("torch", "Size"): tuple,
    ("_codecs", "encode"): _encode,
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
}


class _RestrictedUnpickler(pickle.Unpickler):
    """find_class hands out only the table above, storage markers or fresh stand-in classes."""

    def __init__(self, file: BinaryIO, load_storage: Any) -> None:
        super().__init__(file)
        self._load_storage = load_storage
        self.ignored: dict[str, None] = {}

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _compat_pickle.NAME_MAPPING:  # protocol 2 spells Python 2 names
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        if (module, name) in _ALLOWED:
            return _ALLOWED[(module, name)]
        if module == "torch" and name in _STORAGE_DTYPES:
            return _StorageType(_STORAGE_DTYPES[name])
        qualified = f"{module}.{name}"
        self.ignored[qualified] = None
        return type(name, (InertObject,), {"foreign_name": qualified, "__module__": "negharness.io.safe_unpickle"})

    def persistent_load(self, pid: Any) -> torch.Tensor:
        if not (isinstance(pid, tuple) and pid and pid[0] == "storage" and isinstance(pid[1], _StorageType)):
            raise pickle.UnpicklingError(f"unsupported persistent id {pid!r:.80}")
        return self._load_storage(pid)


def _as_tensor(raw: bytes | bytearray, dtype: torch.dtype) -> torch.Tensor:
    data = bytearray(raw)
    return torch.frombuffer(data, dtype=dtype) if data else torch.empty(0, dtype=dtype)


def _load_zip(path: Path) -> Unpickled:
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        pkl = next((n for n in names if n.endswith("data.pkl") and n.count("/") == 1), None)
        if pkl is None:
            raise pickle.UnpicklingError("zip file without a top-level */data.pkl")
        prefix = pkl[: -len("data.pkl")]
        if f"{prefix}byteorder" in names and archive.read(f"{prefix}byteorder").strip() == b"big":
            raise pickle.UnpicklingError("big-endian checkpoints are not supported")
        cache: dict[str, torch.Tensor] = {}

        def load_storage(pid: tuple) -> torch.Tensor:
            key, dtype = str(pid[2]), pid[1].dtype
            if key not in cache:
                cache[key] = _as_tensor(archive.read(f"{prefix}data/{key}"), dtype)
            return cache[key]

        unpickler = _RestrictedUnpickler(io.BytesIO(archive.read(pkl)), load_storage)
        obj = unpickler.load()
    return Unpickled(obj, list(unpickler.ignored))


def _load_legacy(path: Path) -> Unpickled:
    """Pre-1.6 stream: magic, protocol, sys info, the object, its storage keys, then each storage's
    element count (int64) and raw bytes in key order."""
    storages: dict[str, tuple[torch.dtype, list]] = {}

    def load_storage(pid: tuple) -> list:
        if len(pid) > 5 and pid[5] is not None:
            raise pickle.UnpicklingError("legacy storage views are not supported")
        key = str(pid[2])
        slot = storages.setdefault(key, (pid[1].dtype, [None]))
        return slot[1]  # filled after the storages are read

    with open(path, "rb") as f:
        header = _RestrictedUnpickler(f, load_storage)
        if header.load() != _LEGACY_MAGIC:
            raise pickle.UnpicklingError("not a torch checkpoint (bad magic number)")
        header.load(), header.load()  # protocol version, sys info (plain data)
        main = _RestrictedUnpickler(f, load_storage)
        obj = main.load()
        keys = _RestrictedUnpickler(f, load_storage).load()
        for key in keys:
            dtype, cell = storages[str(key)]
            (numel,) = struct.unpack("<q", f.read(8))
            size = torch.empty(0, dtype=dtype).element_size()
            cell[0] = _as_tensor(f.read(numel * size), dtype)
    return Unpickled(_resolve_legacy(obj), list(main.ignored))


def _resolve_legacy(obj: Any) -> Any:
    """Legacy tensors were built before their storages were read: rebuild them now."""
    if isinstance(obj, _PendingTensor):
        return obj.resolve()
    if isinstance(obj, dict):  # dict or OrderedDict, order kept
        return type(obj)((k, _resolve_legacy(v)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return type(obj)(_resolve_legacy(v) for v in obj)
    return obj


def restricted_load(path: str | Path) -> Unpickled:
    """Read a torch.save file (zip or legacy) building only tensors, containers and stand-ins."""
    path = Path(path)
    if zipfile.is_zipfile(path):
        return _load_zip(path)
    return _load_legacy(path)
