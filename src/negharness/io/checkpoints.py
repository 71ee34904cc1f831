"""Safe checkpoint loading and saving: safetensors, torch.load(weights_only=True), or tensors only.

Published checkpoints come wrapped in many ways; `read_checkpoint` unwraps the released layouts so
every model plugin reads them the same way:

- open_clip training / NegBench / NegCLIP: ``{"epoch", "name", "state_dict", "optimizer"}``, keys
  under DistributedDataParallel's ``module.``;
- nT2VR (CLIP*, CLIP-bnl ``.pth.tar``): ``{"epoch", "model", "best_perf", "config", "opt",
  "optimizer"}`` with the CLIP under ``clip_model.ClipModel.``, ``config``/``opt`` pickled objects;
- CLIP4Clip ``pytorch_model.bin.N``: a bare state dict, CLIP under ``clip.`` (its plugin splits it).

A bare state dict with OpenAI CLIP's ViT keys (`openai_layout`: ``visual.transformer.resblocks.0.attn.
in_proj_weight``, ``positional_embedding``, ``text_projection``, ... and nothing else), with no wrapper
and no ``module.`` prefix, is what OpenAI's ``clip`` package and its fine-tunes save
(``torch.save(model.state_dict())``: NegationCLIP) and what open_clip builds with QuickGELU when it
reads such a file itself (``load_openai_model``); `Checkpoint.openai_format` says so. The keys cannot
tell the activation (open_clip's own ViT CLIP has the same names), so a model plugin asks for it.

Files that pickle foreign objects (nT2VR's ``opt``, ``config``), which weights_only refuses, are
read by `negharness.io.safe_unpickle`: tensors only, the objects replaced by inert stand-ins and named.
A file that would *call* something other than a known data constructor (``os.system`` in a nested
object) is refused naming the global; ``NEGHARNESS_SKIP_PICKLE_CALLS=1`` reads it with the calls
skipped (named in a warning and the record's ``checkpoint_notes``).
"""

from __future__ import annotations

import json
import pickle
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from negharness.contracts.errors import UserError
from negharness.contracts.options import env_flag
from negharness.io.safe_unpickle import CallRefused, InertObject, restricted_load
from negharness.io.atomic_files import atomic_write

_WRAPPER_KEYS = ("state_dict", "model_state_dict", "model", "module")
_PREFIXES = ("module.", "clip_model.ClipModel.")  # DDP / DataParallel; nT2VR's CLIPEncoder
_OPENAI_EXTRAS = ("input_resolution", "context_length", "vocab_size")  # ints in OpenAI's JIT state dict
SKIP_CALLS_ENV = "NEGHARNESS_SKIP_PICKLE_CALLS"
# every key of OpenAI CLIP's ViT state dict (clip/model.py, as open_clip's build_model_from_openai_state_dict reads it)
_OPENAI_BLOCK = r"transformer\.resblocks\.\d+\.(?:attn\.(?:in_proj_weight|in_proj_bias|out_proj\.weight|out_proj\.bias)" \
                r"|ln_[12]\.(?:weight|bias)|mlp\.c_(?:fc|proj)\.(?:weight|bias))"
_OPENAI_KEY = re.compile(r"(?:visual\.)?" + _OPENAI_BLOCK + r"|positional_embedding|text_projection|logit_scale"
                         r"|token_embedding\.weight|ln_final\.(?:weight|bias)|input_resolution|context_length|vocab_size"
                         r"|visual\.(?:class_embedding|positional_embedding|proj|conv1\.weight|ln_(?:pre|post)\.(?:weight|bias))")
_OPENAI_REQUIRED = ("visual.conv1.weight", "visual.proj", "visual.positional_embedding",
                    "visual.transformer.resblocks.0.attn.in_proj_weight", "transformer.resblocks.0.attn.in_proj_weight",
                    "positional_embedding", "text_projection", "token_embedding.weight", "ln_final.weight")
_SHOWN_SHAPES = 3  # mismatching tensors named in the one-line error


def pickle_calls_skipped() -> bool:
    """``NEGHARNESS_SKIP_PICKLE_CALLS=1``: read a pickle that would call a foreign global (the call
    skipped, a stand-in in its place) instead of refusing it. Off by default: such a file is refused."""
    return env_flag(SKIP_CALLS_ENV)


@dataclass
class Checkpoint:
    """A checkpoint's tensors and what was learnt reading it (for warnings and describe())."""

    path: Path
    state: dict[str, torch.Tensor]
    wrapper: str | None = None  # the key the state dict sat under
    stripped: list[str] = field(default_factory=list)  # key prefixes removed
    ignored: list[str] = field(default_factory=list)  # foreign pickled objects not built
    skipped: list[str] = field(default_factory=list)  # calls not made (NEGHARNESS_SKIP_PICKLE_CALLS=1)

    @property
    def openai_format(self) -> bool:
        """A bare OpenAI-layout state dict (no wrapper key, no prefix stripped): see `openai_layout`."""
        return self.wrapper is None and not self.stripped and openai_layout(self.state)

    def notes(self) -> dict[str, Any]:
        """What describe() records about the file: only facts that follow from its content."""
        out: dict[str, Any] = {"ignored_objects": list(self.ignored)} if self.ignored else {}
        return {**out, "skipped_calls": list(self.skipped)} if self.skipped else out


def openai_layout(state: dict[str, Any]) -> bool:
    """Whether every key is one of OpenAI CLIP's ViT state dict (the JIT file's three integers allowed)
    and its towers' first blocks and embeddings are all there."""
    return all(k in state for k in _OPENAI_REQUIRED) and all(_OPENAI_KEY.fullmatch(k) for k in state)


def _weights_only_refused(exc: Exception) -> bool:
    return isinstance(exc, pickle.UnpicklingError) and "weights only" in str(exc).lower()


def _read_raw(path: Path) -> tuple[Any, list[str], list[str]]:
    """The file's object tree, the foreign objects ignored reading it and the calls skipped."""
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        try:
            return load_file(str(path)), [], []
        except Exception as exc:  # safetensors raises its own error types
            raise UserError(f"{path}: not a readable safetensors file ({exc})") from exc
    try:
        return torch.load(str(path), map_location="cpu", weights_only=True), [], []
    except Exception as exc:
        if not _weights_only_refused(exc):
            if path.is_file() and path.stat().st_size == 0:
                raise UserError(f"{path}: empty file (0 bytes), not a torch checkpoint") from exc
            first = (str(exc).splitlines() or [type(exc).__name__])[0]
            raise UserError(f"{path}: not a readable torch checkpoint ({first})") from exc
    try:  # weights_only refuses foreign objects; read the tensors alone
        out = restricted_load(path, skip_calls=pickle_calls_skipped())
    except CallRefused as exc:
        raise UserError(f"{path}: refused: the pickle would call {exc.name}, which is not a data constructor "
                        f"(nothing was run); to read its tensors with such calls skipped, set "
                        f"{SKIP_CALLS_ENV}=1") from None
    except Exception as exc:
        raise UserError(f"{path}: not a readable torch checkpoint ({type(exc).__name__}: {exc}); neither "
                        "torch.load(weights_only=True) nor the tensors-only reader could read it") from exc
    return out.obj, out.ignored, out.skipped


def _is_state_dict(obj: Any) -> bool:
    return isinstance(obj, dict) and bool(obj) and all(isinstance(v, torch.Tensor) for v in obj.values())


def _drop_inert(obj: Any) -> Any:
    """A tensor dict with foreign objects beside the tensors keeps the tensors (the objects are named
    in the warning already)."""
    if isinstance(obj, dict) and any(isinstance(v, torch.Tensor) for v in obj.values()):
        return {k: v for k, v in obj.items() if not isinstance(v, InertObject)}
    return obj


def _find_state_dict(raw: Any, path: Path | str) -> tuple[dict[str, torch.Tensor], str | None]:
    obj, wrapper = _drop_inert(raw), None
    for _ in range(3):
        if isinstance(obj, dict) and not any(isinstance(v, torch.Tensor) for v in obj.values()):
            key = next((k for k in _WRAPPER_KEYS if isinstance(obj.get(k), dict)), None)
            if key is None:
                break
            obj, wrapper = _drop_inert(obj[key]), key if wrapper is None else f"{wrapper}.{key}"
    if not _is_state_dict(obj):
        keys = list(raw)[:8] if isinstance(raw, dict) else type(raw).__name__
        raise UserError(f"{path}: no tensor state dict found (top-level keys: {keys})")
    return dict(obj), wrapper


def strip_prefixes(state: dict[str, torch.Tensor], prefixes: tuple[str, ...] = _PREFIXES
                   ) -> tuple[dict[str, torch.Tensor], list[str]]:
    """Remove each known prefix that every key carries (in any order, repeatedly)."""
    stripped: list[str] = []
    changed = True
    while changed:
        changed = False
        for prefix in prefixes:
            if state and all(k.startswith(prefix) for k in state):
                state = {k[len(prefix):]: v for k, v in state.items()}
                stripped.append(prefix)
                changed = True
    return state, stripped


def read_checkpoint(path: str | Path) -> Checkpoint:
    """Tensors of a checkpoint file in any released layout above; warns about ignored objects."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"checkpoint not found: {path}")
    raw, ignored, skipped = _read_raw(path)
    state, wrapper = _find_state_dict(raw, path)
    state, stripped = strip_prefixes(state)
    if skipped:
        warnings.warn(f"{path}: skipped calls to {', '.join(skipped)} ({SKIP_CALLS_ENV}=1); only the tensors "
                      "were read, nothing in the file was run", stacklevel=2)
    if ignored:
        warnings.warn(f"{path}: ignored pickled objects that are not weights ({', '.join(ignored)}); "
                      "only the tensors were read, nothing in the file was run", stacklevel=2)
    return Checkpoint(path, state, wrapper, stripped, ignored, skipped)


def load_state_dict(path: str | Path) -> dict[str, torch.Tensor]:
    return read_checkpoint(path).state


def shape_mismatches(module: torch.nn.Module, state: dict[str, torch.Tensor]
                     ) -> list[tuple[str, tuple[int, ...], tuple[int, ...]]]:
    """(key, checkpoint shape, model shape) for each tensor both have with other shapes, in the
    model's order (torch would raise a multi-line error for these, even with strict=False)."""
    own = module.state_dict()
    return [(k, tuple(state[k].shape), tuple(v.shape)) for k, v in own.items()
            if k in state and isinstance(state[k], torch.Tensor) and tuple(state[k].shape) != tuple(v.shape)]


def kind_mismatches(module: torch.nn.Module, state: dict[str, torch.Tensor]) -> list[tuple[str, torch.dtype, torch.dtype]]:
    """(key, checkpoint dtype, model dtype) where a floating-point model tensor would be filled from an
    integer, boolean or complex one: torch casts those silently (weights x1000 as int64 load "fine")."""
    own = module.state_dict()
    return [(k, state[k].dtype, v.dtype) for k, v in own.items()
            if k in state and isinstance(state[k], torch.Tensor) and v.is_floating_point()
            and not state[k].is_floating_point()]


def _shape(shape: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(n) for n in shape) + "]"


def fit_state_dict(module: torch.nn.Module, state: dict[str, torch.Tensor], source: Any, what: str) -> None:
    """Load ``state`` into ``module``; a mismatch (keys or shapes) is one error naming the file and
    the first keys, with both shapes for a tensor of another shape."""
    state = {k: v for k, v in state.items() if k not in _OPENAI_EXTRAS}
    bad = shape_mismatches(module, state)
    if bad:
        shown = "; ".join(f"{k}: checkpoint {_shape(a)}, model {_shape(b)}" for k, a, b in bad[:_SHOWN_SHAPES])
        more = f" (and {len(bad) - _SHOWN_SHAPES} more)" if len(bad) > _SHOWN_SHAPES else ""
        raise UserError(f"{source}: does not fit {what}: {len(bad)} tensor(s) of another shape, {shown}{more}")
    kinds = kind_mismatches(module, state)
    if kinds:
        shown = "; ".join(f"{k}: checkpoint {a}, model {b}" for k, a, b in kinds[:_SHOWN_SHAPES])
        more = f" (and {len(kinds) - _SHOWN_SHAPES} more)" if len(kinds) > _SHOWN_SHAPES else ""
        raise UserError(f"{source}: does not fit {what}: {len(kinds)} weight tensor(s) that are not floating "
                        f"point, {shown}{more}")
    missing, unexpected = module.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise UserError(
            f"{source}: does not fit {what} ({len(missing)} missing, e.g. {sorted(missing)[:5]}; "
            f"{len(unexpected)} unexpected, e.g. {sorted(unexpected)[:5]})")


def equals_base(state: dict[str, torch.Tensor], base: dict[str, torch.Tensor] | None) -> bool:
    """True when every tensor equals the base model's at the checkpoint's precision: a
    "fine-tuned" file that was never changed (or saved before the first step)."""
    if not base:
        return False
    shared = [k for k in state if k in base and k not in _OPENAI_EXTRAS]
    if not shared or len(shared) < len([k for k in state if k not in _OPENAI_EXTRAS]):
        return False
    for key in shared:
        a, b = state[key], base[key]
        if a.shape != b.shape or not torch.equal(a, b.to(a.dtype)):
            return False
    return True


def base_note(state: dict[str, torch.Tensor], base: dict[str, torch.Tensor] | None, base_name: str,
              path: Any) -> str | None:
    """Warn and return a describe() note when the checkpoint is its base model unchanged."""
    if not equals_base(state, base):
        return None
    note = f"weights equal the base model {base_name}: this checkpoint is not fine-tuned"
    warnings.warn(f"{path}: {note}", stacklevel=2)
    return note


def save_safetensors(path: str | Path, state: dict[str, torch.Tensor], metadata: dict[str, Any] | None = None) -> Path:
    """Atomic safetensors write; ``metadata`` values are JSON-encoded into the file header."""
    from safetensors.torch import save_file

    tensors = {k: v.detach().cpu().contiguous() for k, v in state.items()}
    meta = {k: json.dumps(v) for k, v in (metadata or {}).items()}
    return atomic_write(path, lambda tmp: save_file(tensors, str(tmp), metadata=meta))
