"""Tensors out of a torch pickle that torch.load(weights_only=True) refuses, without running it.

Released checkpoints often pickle objects of their authors' classes beside the weights (nT2VR's
``.pth.tar`` keeps an ``argparse.Namespace`` and a config object). `torch.load(weights_only=True)`
refuses such files as a whole. This unpickler builds only tensors (from the file's raw storages),
plain containers and scalars; every other global a file names becomes an inert stand-in class
that records its name and is never imported. An object of such a class (pickle's NEWOBJ/BUILD, or
``copyreg._reconstructor`` at protocols 0-1) is plain data and becomes a stand-in; a *call* of a
foreign global (pickle's REDUCE: ``os.system(...)`` or any function or class the file names, other
than a few known data constructors) is refused with `CallRefused` naming the global, or, with
``skip_calls``, skipped (a stand-in in its place) and named. It reads torch's zip format
(``data.pkl`` + ``data/N``) and the legacy pre-1.6 stream format.
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
from typing import Any, BinaryIO, Callable

import torch

_STORAGE_DTYPES = {
    "DoubleStorage": torch.float64, "FloatStorage": torch.float32, "HalfStorage": torch.float16,
    "BFloat16Storage": torch.bfloat16, "LongStorage": torch.int64, "IntStorage": torch.int32,
    "ShortStorage": torch.int16, "CharStorage": torch.int8, "ByteStorage": torch.uint8,
    "BoolStorage": torch.bool, "ComplexFloatStorage": torch.complex64,
    "ComplexDoubleStorage": torch.complex128, "UntypedStorage": torch.uint8,
}
_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C


class CallRefused(pickle.UnpicklingError):
    """The pickle would call ``name`` (a global that is not a known data constructor)."""

    def __init__(self, name: str) -> None:
        super().__init__(f"the pickle would call {name}")
        self.name = name


class _ForeignType(type):
    """Metaclass of the stand-ins: pickle's NEWOBJ builds one through ``__new__`` (data); REDUCE
    calls it (``cls(*args)``), which lands here and asks the unpickler's policy."""

    _on_call: Callable[[type], Any]  # the unpickler's policy, set on each stand-in class (`find_class`)

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        return cls._on_call(cls)


class InertObject(metaclass=_ForeignType):
    """Stand-in for an object of a class the file names: accepts any construction, keeps nothing."""

    foreign_name = "?"

    @staticmethod
    def _on_call(cls: type) -> Any:
        raise CallRefused(getattr(cls, "foreign_name", "?"))

    def __setitem__(self, key: Any, value: Any) -> None:  # a dict subclass's SETITEMS
        pass

    def append(self, value: Any) -> None:  # a list subclass's APPENDS
        pass

    def extend(self, values: Any) -> None:
        pass

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
    """What came out: the object tree (tensors, containers, stand-ins), the foreign names met and
    the calls skipped (only with ``skip_calls``; else such a file raises `CallRefused`)."""

    obj: Any
    ignored: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def _rebuild_tensor(storage: torch.Tensor, offset: int, size: tuple[int, ...], stride: tuple[int, ...],
                    *_: Any) -> torch.Tensor:
    return storage.as_strided(tuple(size), tuple(stride), offset)


@dataclass
class _PendingTensor:
    cell: list[Any]
    offset: int
    size: tuple[Any, ...]
    stride: tuple[Any, ...]

    def resolve(self) -> torch.Tensor:
        return _rebuild_tensor(self.cell[0], self.offset, self.size, self.stride)


def _rebuild_any(storage: Any, offset: int, size: tuple[Any, ...], stride: tuple[Any, ...], *rest: Any) -> Any:
    if isinstance(storage, list):  # legacy: storage bytes come after the object
        return _PendingTensor(storage, offset, tuple(size), tuple(stride))
    return _rebuild_tensor(storage, offset, size, stride)


def _rebuild_parameter(data: Any, *_: Any) -> Any:
    return data


def _rebuild_from_type(func: Any, _new_type: Any, args: tuple[Any, ...], _state: Any) -> Any:
    return func(*args)


def _inert_data(*_: Any) -> "InertObject":
    """A known data constructor (a numpy scalar or array, a torch.device): not weights, kept as a stand-in."""
    return object.__new__(InertObject)


def _reconstructor(cls: Any, base: Any, state: Any = None) -> Any:
    """Protocols 0-1 spell an object of class ``cls`` as copyreg._reconstructor(cls, object, None)."""
    if isinstance(cls, type) and issubclass(cls, InertObject):
        return object.__new__(cls)
    raise pickle.UnpicklingError(f"copyreg._reconstructor of {getattr(cls, '__name__', cls)!r}")


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
    ("builtins", "object"): object,  # copyreg._reconstructor's base
    ("collections", "defaultdict"): lambda *_: {},  # the factory is never called
    ("copyreg", "_reconstructor"): _reconstructor,
}
# Known data constructors whose values are not weights: read as stand-ins (named), never called.
_DATA_CONSTRUCTORS = {
    ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy", "dtype"), ("torch", "device"),
}


class _RestrictedUnpickler(pickle.Unpickler):
    """find_class hands out only the table above, storage markers or fresh stand-in classes."""

    def __init__(self, file: BinaryIO, load_storage: Callable[[tuple[Any, ...]], Any],
                 skip_calls: bool = False) -> None:
        super().__init__(file)
        self._load_storage = load_storage
        self.ignored: dict[str, None] = {}
        self.skipped: dict[str, None] = {}  # calls not made (skip_calls)
        self._skip_calls = skip_calls

    def _on_call(self, cls: type) -> Any:
        name = getattr(cls, "foreign_name", "?")
        if not self._skip_calls:
            raise CallRefused(name)
        self.skipped[name] = None
        return object.__new__(cls)

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _compat_pickle.NAME_MAPPING:  # protocol 2 spells Python 2 names
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        if (module, name) in _ALLOWED:
            return _ALLOWED[(module, name)]
        if (module, name) in _DATA_CONSTRUCTORS:
            self.ignored[f"{module}.{name}"] = None
            return _inert_data
        if module == "torch" and name in _STORAGE_DTYPES:
            return _StorageType(_STORAGE_DTYPES[name])
        qualified = f"{module}.{name}"
        self.ignored[qualified] = None
        return _ForeignType(name, (InertObject,), {"foreign_name": qualified, "_on_call": staticmethod(self._on_call),
                                                   "__module__": "negharness.io.safe_unpickle"})

    def persistent_load(self, pid: Any) -> Any:  # the loader's storage: a tensor, or a list when checking
        if not (isinstance(pid, tuple) and pid and pid[0] == "storage" and isinstance(pid[1], _StorageType)):
            raise pickle.UnpicklingError(f"unsupported persistent id {pid!r:.80}")
        return self._load_storage(pid)


def _as_tensor(raw: bytes | bytearray, dtype: torch.dtype) -> torch.Tensor:
    data = bytearray(raw)
    return torch.frombuffer(data, dtype=dtype) if data else torch.empty(0, dtype=dtype)


def _load_zip(path: Path, skip_calls: bool) -> Unpickled:
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        pkl = next((n for n in names if n.endswith("data.pkl") and n.count("/") == 1), None)
        if pkl is None:
            raise pickle.UnpicklingError("zip file without a top-level */data.pkl")
        prefix = pkl[: -len("data.pkl")]
        if f"{prefix}byteorder" in names and archive.read(f"{prefix}byteorder").strip() == b"big":
            raise pickle.UnpicklingError("big-endian checkpoints are not supported")
        cache: dict[str, torch.Tensor] = {}

        def load_storage(pid: tuple[Any, ...]) -> torch.Tensor:
            key, dtype = str(pid[2]), pid[1].dtype
            if key not in cache:
                cache[key] = _as_tensor(archive.read(f"{prefix}data/{key}"), dtype)
            return cache[key]

        unpickler = _RestrictedUnpickler(io.BytesIO(archive.read(pkl)), load_storage, skip_calls)
        obj = unpickler.load()
    return Unpickled(obj, list(unpickler.ignored), list(unpickler.skipped))


def _load_legacy(path: Path, skip_calls: bool) -> Unpickled:
    """Pre-1.6 stream: magic, protocol, sys info, the object, its storage keys, then each storage's
    element count (int64) and raw bytes in key order."""
    storages: dict[str, tuple[torch.dtype, list[Any]]] = {}

    def load_storage(pid: tuple[Any, ...]) -> list[Any]:
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
        main = _RestrictedUnpickler(f, load_storage, skip_calls)
        obj = main.load()
        keys = _RestrictedUnpickler(f, load_storage).load()
        for key in keys:
            dtype, cell = storages[str(key)]
            (numel,) = struct.unpack("<q", f.read(8))
            size = torch.empty(0, dtype=dtype).element_size()
            cell[0] = _as_tensor(f.read(numel * size), dtype)
    return Unpickled(_resolve_legacy(obj), list(main.ignored), list(main.skipped))


def _resolve_legacy(obj: Any) -> Any:
    """Legacy tensors were built before their storages were read: rebuild them now."""
    if isinstance(obj, _PendingTensor):
        return obj.resolve()
    if isinstance(obj, dict):  # dict or OrderedDict, order kept
        return type(obj)((k, _resolve_legacy(v)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return type(obj)(_resolve_legacy(v) for v in obj)
    return obj


def restricted_load(path: str | Path, skip_calls: bool = False) -> Unpickled:
    """Read a torch.save file (zip or legacy) building only tensors, containers and stand-ins; a call
    of a foreign global raises `CallRefused`, or with ``skip_calls`` is skipped and named."""
    path = Path(path)
    if zipfile.is_zipfile(path):
        return _load_zip(path, skip_calls)
    return _load_legacy(path, skip_calls)
