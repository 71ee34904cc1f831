"""What an open_clip model is built from: its architecture (a name, or a config file), its activation
(GELU or QuickGELU: from the pretrained tag, the architecture, or a checkpoint's shapes) and the
weights open_clip keeps in the Hugging Face cache; and building one without drawing random weights
that the loaded state overwrites anyway. `negharness.plugins.openclip_model.OpenClipModel.create`
decides with these; nothing here touches the network.
"""

from __future__ import annotations

import contextlib
import copy
import json
import warnings
from pathlib import Path
from typing import Any, Iterator, NoReturn, Protocol, Sequence

import torch

from negharness.api import UserError
from negharness.api.checkpoints import fit_state_dict, load_state_dict
from negharness.api.files import hash_json


# torch.nn.init functions module constructors call (nn.Linear, open_clip's init_parameters): each fills
# a tensor in place and returns it; and the random fills of tensors, reached through names bound at
# import (nn.MultiheadAttention's xavier_uniform_)
_INIT_FUNCTIONS = ("uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_", "eye_", "dirac_",
                   "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "orthogonal_", "sparse_")
_RANDOM_FILLS = ("uniform_", "normal_")


class TextTokenizer(Protocol):
    """open_clip's tokenizer as the package calls it (open_clip ships no types): texts -> (N, context) int64."""

    context_length: int

    def __call__(self, texts: str | list[str], context_length: int | None = None) -> torch.Tensor: ...


@contextlib.contextmanager
def no_random_init(skip: bool = True) -> Iterator[list[torch.Tensor]]:
    """While a model whose every tensor a checkpoint then overwrites is built, initialisation fills do
    nothing: drawing ViT-B-32's 151M random numbers took ~0.8-1.5 s of a 2-core run's model load, all
    thrown away. Yields the tensors left unfilled, for `fills_all_loaded`. Build-time only, in the
    main thread before decode threads start (the patch is process-wide). The global torch RNG is not
    advanced by the skipped draws: code that seeds it before building a model from a checkpoint (a
    fine-tune) draws a different, still seeded and reproducible, stream afterwards than it used to."""
    import torch.nn.init as init

    skipped: list[torch.Tensor] = []
    if not skip:
        yield skipped
        return
    saved = {name: getattr(init, name) for name in _INIT_FUNCTIONS if hasattr(init, name)}
    own = {name: torch.Tensor.__dict__.get(name) for name in _RANDOM_FILLS}

    def keep(tensor: torch.Tensor, *_args: Any, **_kwargs: Any) -> torch.Tensor:
        skipped.append(tensor)
        return tensor

    for name in saved:
        setattr(init, name, keep)
    for name in _RANDOM_FILLS:
        setattr(torch.Tensor, name, keep)
    try:
        yield skipped
    finally:
        for name, fn in saved.items():
            setattr(init, name, fn)
        for name, method in own.items():
            if method is None:
                delattr(torch.Tensor, name)
            else:
                setattr(torch.Tensor, name, method)


def fills_all_loaded(model: torch.nn.Module, skipped: list[torch.Tensor]) -> bool:
    """Whether every tensor whose fill was skipped lies in the model's state dict, which
    `fit_state_dict` loads whole (it refuses a checkpoint that misses a key): then no unfilled memory
    survives the load. A fill of anything else (a random non-persistent buffer) is False."""
    loaded = {t.untyped_storage().data_ptr() for t in model.state_dict(keep_vars=True).values()}
    return all(t.untyped_storage().data_ptr() in loaded for t in skipped)


def model_from_config_file(path: Path, quick_gelu: bool) -> tuple[torch.nn.Module, TextTokenizer, str]:
    """Build an open_clip CLIP from a local JSON config: open_clip's ``open_clip_config.json`` layout
    (``model_cfg`` + ``preprocess_cfg``) or a bare model config. Returns (model, tokenizer, arch id)."""
    import open_clip
    from open_clip.transform import PreprocessCfg, merge_preprocess_dict

    try:
        cfg = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(f"--arch {path}: not a readable open_clip JSON config ({exc})") from exc
    model_cfg = dict(cfg.get("model_cfg", cfg))
    model_cfg.pop("preprocess_cfg", None)
    if quick_gelu:
        model_cfg["quick_gelu"] = True
    try:
        model = open_clip.model.CLIP(**model_cfg)
    except TypeError as exc:
        raise UserError(f"--arch {path}: not an open_clip CLIP config ({exc})") from exc
    pp = merge_preprocess_dict(PreprocessCfg(), cfg.get("preprocess_cfg", {}))
    pp["size"] = model.visual.image_size
    open_clip.model.set_model_preprocess_cfg(model, pp)
    context = model_cfg.get("text_cfg", {}).get("context_length", 77)
    return model, simple_tokenizer(context), hash_json(cfg)


def simple_tokenizer(context_length: int) -> TextTokenizer:
    """open_clip's default BPE tokenizer at ``context_length``. Building one parses the 49k-merge
    vocabulary again (~0.2 s, 3% of a world run); open_clip built one with default settings on import,
    so a shallow copy with its own context length is the same tokenizer (tested: equal tokens)."""
    import open_clip.tokenizer as tk

    base = getattr(tk, "_tokenizer", None)
    if base is None or type(base) is not tk.SimpleTokenizer:
        fresh: TextTokenizer = tk.SimpleTokenizer(context_length=context_length)
        return fresh
    # shares the vocabulary tables and the word cache, read-only but for memoising
    made: TextTokenizer = copy.copy(base)
    made.context_length = context_length
    return made


def tag_quick_gelu(arch: str, pretrained: str | None) -> bool | None:
    """Whether open_clip's pretrained registry says this tag was trained with QuickGELU (OpenAI and
    LAION-400M ViT-B/32 tags, MetaCLIP, ...); None for no tag or a tag the registry does not know.
    Reads the registry only: nothing is downloaded."""
    if not pretrained:
        return None
    from open_clip.pretrained import get_pretrained_cfg

    cfg = get_pretrained_cfg(arch, pretrained)
    return bool(cfg.get("quick_gelu", False)) if cfg else None


def arch_quick_gelu(arch: str) -> bool:
    """An architecture whose own config sets QuickGELU (the ``-quickgelu`` variants)."""
    import open_clip

    return bool((open_clip.get_model_config(arch) or {}).get("quick_gelu", False))


def resolve_quick_gelu(arch: str, pretrained: str | None, explicit: bool | None, default: bool | None) -> bool:
    """The activation a named architecture runs with: an explicit ``-M quick_gelu`` wins (with a warning
    when it contradicts the tag's training), else the tag's pretrained config, else the plugin default.
    A ``-quickgelu`` architecture always runs QuickGELU: open_clip cannot switch it off."""
    from_tag = tag_quick_gelu(arch, pretrained)
    if explicit is not None:
        if from_tag is not None and explicit != from_tag:
            warnings.warn(f"-M quick_gelu={str(explicit).lower()} contradicts {arch}/{pretrained}, which was "
                          f"trained with {'QuickGELU' if from_tag else 'GELU'}; running as asked", stacklevel=3)
        chosen = explicit
    else:
        chosen = from_tag if from_tag is not None else bool(default)
    if not chosen and arch_quick_gelu(arch):
        if explicit is False:
            warnings.warn(f"--arch {arch} sets QuickGELU in its own config; -M quick_gelu=false cannot turn it off",
                          stacklevel=3)
        return True
    return chosen


def state_geometry(state: dict[str, torch.Tensor]) -> dict[str, int]:
    """The shape of a ViT CLIP as its OpenAI-layout weights give it (open_clip's
    ``build_model_from_openai_state_dict`` reads the same tensors): widths, layers, patch, image size."""
    patch = int(state["visual.conv1.weight"].shape[-1])
    grid = round((int(state["visual.positional_embedding"].shape[0]) - 1) ** 0.5)

    def layers(prefix: str) -> int:
        return len({k.split(".")[len(prefix.split("."))] for k in state if k.startswith(prefix + ".")})

    return {"vision_width": int(state["visual.conv1.weight"].shape[0]), "patch_size": patch, "image_size": patch * grid,
            "vision_layers": layers("visual.transformer.resblocks"), "text_width": int(state["ln_final.weight"].shape[0]),
            "text_layers": layers("transformer.resblocks"), "embed_dim": int(state["text_projection"].shape[1]),
            "context_length": int(state["positional_embedding"].shape[0])}


def config_geometry(arch: str) -> dict[str, int]:
    """`state_geometry`'s numbers from open_clip's config of a named architecture."""
    import open_clip

    cfg = open_clip.get_model_config(arch) or {}
    v, t = cfg.get("vision_cfg", {}), cfg.get("text_cfg", {})
    size = v.get("image_size")
    return {"vision_width": v.get("width"), "patch_size": v.get("patch_size"),
            "image_size": size[0] if isinstance(size, (list, tuple)) else size, "vision_layers": v.get("layers"),
            "text_width": t.get("width"), "text_layers": t.get("layers"), "embed_dim": cfg.get("embed_dim"),
            "context_length": t.get("context_length", 77)}


def arch_of_state(state: dict[str, torch.Tensor], archs: Sequence[str], source: object) -> str:
    """Which of ``archs`` (named open_clip architectures) an OpenAI-layout checkpoint is, by its shapes;
    none matching is an error naming the file and what its tensors say."""
    try:
        found = state_geometry(state)
    except (KeyError, IndexError) as exc:
        raise UserError(f"{source}: not a ViT CLIP state dict in OpenAI's layout (no {exc}); pass --arch") from None
    for arch in archs:
        if config_geometry(arch) == found:
            return arch
    shown = ", ".join(f"{k} {v}" for k, v in found.items())
    raise UserError(f"{source}: its tensors ({shown}) are none of {', '.join(archs)}; pass --arch")


def refuse_unstated_gelu(source: object, arch: str) -> NoReturn:
    """A bare OpenAI-layout state dict about to run a named architecture with plain GELU because nothing
    said otherwise: the open_clip #771 trap (OpenAI CLIP and its fine-tunes need QuickGELU; loaded as GELU
    they run and give wrong numbers, as published ARO/SugarCrepe results once did). Refused, naming the file."""
    raise UserError(
        f"--checkpoint {source}: a bare state dict in OpenAI CLIP's layout (as OpenAI's clip package and its "
        f"fine-tunes, e.g. NegationCLIP, save it), to run as --arch {arch}, which uses GELU: OpenAI CLIP and its "
        "fine-tunes need QuickGELU, and the keys cannot tell which one these weights were trained with. Say it: "
        "-M quick_gelu=true for OpenAI-based weights (or --model negationclip), -M quick_gelu=false for weights "
        "trained from scratch with GELU")


def cached_pretrained_file(arch: str, tag: str) -> Path | None:
    """The file of open_clip's weights for arch/tag if already in the Hugging Face cache (never downloads)."""
    import open_clip

    hub = (open_clip.get_pretrained_cfg(arch, tag) or {}).get("hf_hub", "") if not arch.endswith(".json") else ""
    if not hub:
        return None
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None

    parts = hub.split("/")
    repo, filename = "/".join(parts[:2]), "/".join(parts[2:])
    names = [filename] if filename else ["open_clip_model.safetensors", "open_clip_pytorch_model.bin"]
    for name in names:
        found = try_to_load_from_cache(repo, name)
        if isinstance(found, str) and Path(found).is_file():
            return Path(found)
    return None


def cached_pretrained_state(arch: str, tag: str) -> dict[str, torch.Tensor] | None:
    """open_clip's weights for arch/tag if already in the Hugging Face cache (never downloads)."""
    found = cached_pretrained_file(arch, tag)
    return load_state_dict(str(found)) if found is not None else None


def pretrained_revision(arch: str, tag: str) -> str | None:
    """The hub commit the tag's weights were downloaded at: the cache keeps each file under
    ``snapshots/<commit>/`` (None for weights from elsewhere, or not in the cache)."""
    found = cached_pretrained_file(arch, tag)
    parts = found.parts if found is not None else ()
    return parts[parts.index("snapshots") + 1] if "snapshots" in parts[:-2] else None
