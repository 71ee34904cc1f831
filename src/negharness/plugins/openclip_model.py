"""CLIP-family models on open_clip: an architecture name or config file, a pretrained tag or a local checkpoint.

Weights from a local file go through `negharness.io.checkpoints` (safetensors or weights-only
torch.load), never through a pickle; a pretrained tag that cannot be fetched fails at once with
what to download and where to put it. The activation (GELU or QuickGELU) comes from open_clip's
pretrained config for the tag, for every tag (LAION-400M ViT-B/32 tags were trained with QuickGELU,
like ``openai``); ``-M quick_gelu=true|false`` overrides it, with a warning when it contradicts the tag.
How architecture, activation and cached weights are found is `negharness.plugins.openclip_weights`; this
module is the model: building it (`OpenClipModel.create`), its preprocessing and its encoders.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence, TypeVar

import numpy as np
import torch
import torch.nn.functional as F

from negharness.api import EmbeddingModel, ModelOptions, UserError
from negharness.api.checkpoints import (
    base_note,
    fit_state_dict,
    hash_state_dict,
    read_checkpoint,
)
from negharness.api.media import PixelTransform, array_to_tensor, jpeg_draft
from negharness.plugins import options as declared
from negharness.plugins.clip_tokenizer import fast_tokenizer
from negharness.plugins.openclip_weights import (
    arch_of_state,
    cached_pretrained_state,
    fills_all_loaded,
    model_from_config_file,
    no_random_init,
    pretrained_revision,
    refuse_unstated_gelu,
    resolve_quick_gelu,
)
from negharness.plugins.token_lengths import (
    TEXT_ENCODER,
    PassTokens,
    bucket_overhead,
    causal_text_tower,
    encode_cut_tokens,
    length_buckets,
    lengths_pay,
    pool_positions,
    sequence_first,
    token_batches,
)

if TYPE_CHECKING:  # open_clip ships no types (no py.typed): its classes read as Any
    import open_clip

OPTIONS = declared.OPEN_CLIP.options  # -M options of every open_clip model (declared without torch)


def geometry_steps(transform: Any, cfg: dict[str, Any]) -> Any:
    """open_clip's eval transform without its last steps (convert to RGB, ToTensor, Normalize with
    the model's mean and std), when it ends with exactly those: `normalised_chw` then does their
    arithmetic in one conversion and three in-place operations instead of a permuted uint8 copy, a
    float copy, a clone and three passes. None for any other transform (it then runs whole)."""
    from open_clip.transform import MaybeConvertMode, MaybeToTensor
    from torchvision.transforms import Compose, Normalize, ToTensor

    steps = list(getattr(transform, "transforms", []))
    if len(steps) < 3 or not isinstance(transform, Compose):
        return None
    convert, to_tensor, norm = steps[-3:]
    if (type(convert) is not MaybeConvertMode or convert.mode != "RGB" or type(to_tensor) not in (MaybeToTensor, ToTensor)
            or type(norm) is not Normalize or norm.inplace
            or [float(v) for v in norm.mean] != [float(v) for v in cfg["mean"]]
            or [float(v) for v in norm.std] != [float(v) for v in cfg["std"]]):
        return None
    return Compose(steps[:-3])  # resize and crop keep an RGB image RGB


def normalised_chw(rgb: np.ndarray, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """uint8 (H, W, 3) -> contiguous float (3, H, W), ``(x / 255 - mean) / std``: torchvision's
    ToTensor + Normalize, the same float32 operations in the same order, so bit-identical (tested)."""
    chw = torch.from_numpy(rgb if rgb.flags.writeable else rgb.copy()).permute(2, 0, 1)
    out = chw.to(torch.float32, memory_format=torch.contiguous_format)
    return out.div_(255.0).sub_(mean).div_(std)


_Made = TypeVar("_Made", bound="OpenClipModel")  # what `create` makes: the class it is called on


class OpenClipModel(EmbeddingModel):
    """Any open_clip CLIP; videos are frames through the image tower, mean-pooled (base class)."""

    # the objects `negharness diagnose` asks about when no --objects is given (`report.diagnose.default_objects`);
    # none here (its COCO objects), a model trained on other words names them (shapes_clip)
    object_words: tuple[str, ...] = ()

    def __init__(self, name: str, model: open_clip.CLIP, tokenizer: Any, arch_id: Any,
                 weights_id: str, quick_gelu: bool) -> None:
        super().__init__()
        self.name = name
        self.model = model.eval()
        # open_clip's default BPE tokenizer, memoised per word (`negharness.plugins.clip_tokenizer`). Not in
        # describe() (the cache key): its ids equal open_clip's (tested on every benchmark text), so no
        # embedding depends on which of the two ran; any other tokenizer is kept as it is.
        self.tokenizer = fast_tokenizer(tokenizer)
        self._arch_id = arch_id
        self._weights_id = weights_id
        self._quick_gelu = quick_gelu
        self.preprocess_cfg = dict(model.visual.preprocess_cfg)
        size = self.preprocess_cfg["size"]
        self._size = tuple(size) if isinstance(size, (list, tuple)) else (size, size)
        self._mean = torch.tensor(self.preprocess_cfg["mean"], dtype=torch.float32).view(3, 1, 1)
        self._std = torch.tensor(self.preprocess_cfg["std"], dtype=torch.float32).view(3, 1, 1)
        self._transform: Callable[[Any], torch.Tensor] | None = None
        self._geometry: Any = None  # the transform's resize and crop, when its tail is `normalised_chw`
        self.jpeg_draft = False  # -M jpeg_draft=true: reduced-scale JPEG decoding (see negharness.api.jpeg_draft)
        self.tensor_transform: PixelTransform | None = None  # -M decode=tensor (see pixel_transform)
        self.checkpoint_notes: dict[str, Any] = {}  # ignored pickled objects, "equals its base model"
        self.weights_content: str | None = None  # a --pretrained tag's weights' hash (`describe`)
        self.text_on_lengths = causal_text_tower(model)  # cutting is exact for this tower (see encode_text)
        self.text_lengths = "auto"  # -M text_lengths: whether to cut, by device (`lengths_pay`)
        self._pass_tokens: PassTokens | None = None  # the last length pre-pass's tokens (`text_batches`)

    # construction ---------------------------------------------------------------------------
    @classmethod
    def create(cls: type[_Made], name: str, options: ModelOptions, default_arch: str = "ViT-B-32",
               default_pretrained: str | None = "openai", default_quick_gelu: bool | None = None,
               state: dict[str, torch.Tensor] | None = None,
               base_pretrained: str | None = None, archs: Sequence[str] = ()) -> _Made:
        """Build from an architecture (name or JSON config) and weights: ``state`` if the caller already
        unpacked a checkpoint (CLIP4Clip), else ``--checkpoint``, else the pretrained tag. A checkpoint is
        compared with its base (``--pretrained``, else ``base_pretrained``, else the default tag) when
        the base weights are in the local cache. ``archs``: the architectures a method's OpenAI-layout
        checkpoints come in; without --arch, the one the file's shapes are (`arch_of_state`). A bare
        OpenAI-layout file on a named GELU architecture with no ``-M quick_gelu`` is refused
        (`refuse_unstated_gelu`). ``options`` as a factory received them (bound to `OPTIONS` or more,
        `takes_options`); raw ones (a builder called directly) are bound to `OPTIONS` the same way."""
        import open_clip

        if not options.bound_to_keys(OPTIONS, at_least=True):
            options = options.bind(OPTIONS, name)
        quick = options.values["quick_gelu"]
        notes: dict[str, Any] = {}
        openai_file = False
        if state is None and options.checkpoint:
            ckpt = read_checkpoint(options.checkpoint)
            state, notes, openai_file = ckpt.state, ckpt.notes(), ckpt.openai_format
        arch = options.arch or (arch_of_state(state, archs, options.checkpoint) if archs and state is not None
                                else default_arch)
        overwritten = state is not None  # every tensor comes from a file
        if arch.endswith(".json"):
            if not Path(arch).is_file():
                raise UserError(f"--arch {arch}: config file not found")
            quick_gelu = bool(quick if quick is not None else default_quick_gelu)
            pretrained = None
        else:
            pretrained = None if overwritten else (options.pretrained or default_pretrained)
            quick_gelu = resolve_quick_gelu(arch, pretrained, quick, default_quick_gelu)
            if openai_file and not quick_gelu and quick is None:
                refuse_unstated_gelu(options.checkpoint, arch)

        def build() -> tuple[open_clip.CLIP, Any, Any]:
            if arch.endswith(".json"):
                return model_from_config_file(Path(arch), quick_gelu)
            return cls._create_named(arch, pretrained, quick_gelu), open_clip.get_tokenizer(arch), arch

        with no_random_init(overwritten) as skipped:
            model, tokenizer, arch_id = build()
        if skipped and not fills_all_loaded(model, skipped):
            model, tokenizer, arch_id = build()  # a fill the checkpoint would not overwrite: built as usual
        if state is not None:
            fit_state_dict(model, state, options.checkpoint or "checkpoint", arch)
            weights_id = hash_state_dict(state)
            base_tag = options.pretrained or base_pretrained or default_pretrained
            if base_tag:
                note = base_note(state, cached_pretrained_state(arch, base_tag), f"{arch}/{base_tag}",
                                 options.checkpoint or "checkpoint")
                notes.update({"note": note} if note else {})
        else:
            weights_id = f"{pretrained}" if pretrained else "random:" + hash_state_dict(model.state_dict())
        made = cls(name, model, tokenizer, arch_id, weights_id, quick_gelu)
        if state is None and pretrained:  # a tag names weights a hub cache holds, whose snapshot may move
            made.weights_content = hash_state_dict(model.state_dict())  # ~0.4 s for ViT-B-32's 600 MB here
        made.frame_sampling = options.frame_sampling()
        made.random_weights = state is None and not pretrained
        made.jpeg_draft = bool(options.values["jpeg_draft"])
        made.text_lengths = options.values.get("text_lengths") or "auto"
        if made.text_lengths == "on" and not made.text_on_lengths:
            warnings.warn(f"-M text_lengths=on: the text tower of {name} is not one that can be cut to token lengths "
                          "exactly (see causal_text_tower); it runs on the full context", stacklevel=2)
        if options.values["decode"] == "tensor":
            made.tensor_transform = made.tensor_preprocessing()
        made.checkpoint_notes = notes
        made.revision = None if state is not None or not pretrained else pretrained_revision(arch, pretrained)
        return made

    @staticmethod
    def _create_named(arch: str, pretrained: str | None, quick_gelu: bool) -> open_clip.CLIP:
        import open_clip

        if arch not in open_clip.list_models():
            from difflib import get_close_matches

            close = get_close_matches(arch, open_clip.list_models(), n=3)
            raise UserError(f"--arch {arch}: not an open_clip architecture"
                            + (f"; did you mean {', '.join(close)}?" if close else ""))
        try:
            return open_clip.create_model(arch, pretrained=pretrained, force_quick_gelu=quick_gelu)
        except Exception as exc:
            if pretrained is None:
                raise
            raise UserError(
                f"could not load pretrained weights {arch}/{pretrained}: {str(exc).splitlines()[0]}. "
                "On a connected machine open_clip downloads them into the Hugging Face cache "
                "(~/.cache/huggingface); offline, download the checkpoint file and pass --checkpoint PATH."
            ) from exc

    # EmbeddingModel -------------------------------------------------------------------------
    def modules(self) -> list[torch.nn.Module]:
        return [self.model]

    def describe(self) -> dict[str, Any]:
        out = {"arch": self._arch_id, "weights": self._weights_id, "quick_gelu": self._quick_gelu,
               "preprocess": self.preprocess_cfg}
        if self.text_on_lengths and self.text_lengths != "off":
            # what the options allow, never the device's choice (`lengths_pay`): a record keeps its identity
            # from CPU to GPU, and fingerprints made before `text_lengths` existed stay as they were. The
            # plan and the full context agree up to float rounding (0.0 max abs difference, H100, bf16,
            # 16,384 captions: ../shared/gpu/gpu_check_run2_h100.log); `off` is its own fingerprint.
            out["text_encoder"] = TEXT_ENCODER
        if self.jpeg_draft:  # only when on: fingerprints of existing caches stay as they were
            out["jpeg_draft"] = True
        if self.tensor_transform is not None:  # likewise: PIL-decoded embeddings keep their fingerprint
            out["image_decode"] = f"tensor|{self.tensor_transform.identity()}"
        if self.checkpoint_notes:
            out["checkpoint_notes"] = self.checkpoint_notes
        if self.weights_content:  # a tag's weights by content: a moved hub snapshot is another model
            out["weights_content"] = self.weights_content
        return out

    def tensor_preprocessing(self) -> PixelTransform:
        """open_clip's eval transform (`preprocess_cfg`: size, mean, std, interpolation, resize mode)
        as tensor ops; a transform they cannot do (longest-side resize, a non-square shortest-side
        one) or ``-M jpeg_draft`` beside it is refused, naming the option."""
        if self.jpeg_draft:
            raise UserError(f"model {self.name}: -M decode=tensor and -M jpeg_draft=true: choose one (jpeg_draft "
                            "is a PIL decoding option)")
        cfg = self.preprocess_cfg
        try:
            return PixelTransform(self._size, tuple(float(v) for v in cfg["mean"]),  # type: ignore[arg-type]
                                  tuple(float(v) for v in cfg["std"]),  # type: ignore[arg-type]
                                  "bilinear" if cfg.get("interpolation") == "bilinear" else "bicubic",  # as open_clip
                                  cfg.get("resize_mode") or "shortest")
        except ValueError as exc:
            raise UserError(f"model {self.name}: -M decode=tensor cannot do its preprocessing: {exc}; use "
                            "-M decode=pil") from None

    def pixel_transform(self) -> PixelTransform | None:
        return self.tensor_transform

    def _at_size(self, frames: Any) -> torch.Tensor | None:
        if getattr(frames, "shape", None) is not None and tuple(frames.shape[-3:-1]) == self._size:
            return array_to_tensor(frames, self._mean, self._std)
        return None

    def preprocess_batch(self, raw: Any, kind: str) -> torch.Tensor:
        fast = self._at_size(raw) if getattr(raw, "ndim", 0) == (5 if kind == "video" else 4) else None
        return fast if fast is not None else super().preprocess_batch(raw, kind)

    def preprocess_video(self, frames: Any) -> torch.Tensor:
        fast = self._at_size(frames) if getattr(frames, "ndim", 0) == 4 else None
        return fast if fast is not None else super().preprocess_video(frames)

    def preprocess_image(self, image: Any) -> torch.Tensor:
        fast = self._at_size(image) if getattr(image, "ndim", 0) == 3 else None
        if fast is not None:  # already at size: resize and crop are identities
            return fast
        if self._transform is None:
            from open_clip.transform import PreprocessCfg, image_transform_v2

            whole = image_transform_v2(PreprocessCfg(**self.preprocess_cfg), is_train=False)
            self._geometry = geometry_steps(whole, self.preprocess_cfg)  # before _transform: decode threads race here
            self._transform = whole
        if not hasattr(image, "convert"):
            from PIL import Image

            image = Image.fromarray(image)
        elif self.jpeg_draft:
            jpeg_draft(image, min(self._size))
        if image.mode != "RGB":  # convert() of an RGB image is a full-size copy
            image = image.convert("RGB")
        if self._geometry is None:
            return self._transform(image)
        return normalised_chw(np.asarray(self._geometry(image)), self._mean, self._std)

    def on_lengths(self) -> bool:
        """Whether texts run on their token lengths here: a tower where that is exact, on a device where it pays."""
        return self.text_on_lengths and lengths_pay(self.device, self.text_lengths)

    def _token_lengths(self, tokens: torch.Tensor) -> torch.Tensor:
        """(B,) each text's length in tokens up to the one it is pooled at (what the tower must compute)."""
        return pool_positions(tokens, self.model.text_pool_type, getattr(self.model, "text_eos_id", None)) + 1

    def text_batches(self, texts: Sequence[str], batch_size: int) -> list[list[int]]:
        """Sorted by token length, at most ``batch_size`` x context token positions a batch (see `token_batches`)."""
        if not self.on_lengths() or not len(texts):
            return super().text_batches(texts, batch_size)
        tokens: torch.Tensor = self.tokenizer(list(texts))
        self._pass_tokens = PassTokens(texts, tokens)  # `prepare_texts` takes its batches' rows from here
        lengths = self._token_lengths(tokens).tolist()
        return token_batches(lengths, max(1, batch_size) * int(self.model.positional_embedding.shape[0]))

    def encode_text(self, texts: Sequence[str]) -> torch.Tensor:
        """Where `on_lengths`: texts of similar token length run together, each bucket cut to its longest
        text, and come back in the order given (equal to the full 77-token context up to float rounding).
        With gradients on (training), a text tower where cutting is not exact, or a device where it does
        not pay (`lengths_pay`), the full context."""
        return self.encode_prepared(self.prepare_texts(texts))

    def prepare_texts(self, texts: Sequence[str]) -> torch.Tensor:
        """The texts' tokens, (N, context) on the CPU: what the runner makes for the next batch in a
        thread while this one encodes; the rows the length pre-pass made (`text_batches`) where it saw them."""
        passed = self._pass_tokens.of(texts) if self._pass_tokens is not None else None
        if passed is not None:
            return passed
        tokens: torch.Tensor = self.tokenizer(list(texts))  # open_clip's tokenizer or ours (`fast_tokenizer`)
        return tokens

    def encode_prepared(self, tokens: torch.Tensor) -> torch.Tensor:
        with sequence_first(self.model, self.device):
            return self._encode_tokens(tokens)

    def _encode_tokens(self, tokens: torch.Tensor) -> torch.Tensor:
        if not self.on_lengths() or torch.is_grad_enabled() or not len(tokens):
            return F.normalize(self.model.encode_text(tokens.to(self.device)).float(), dim=-1)
        lengths = self._token_lengths(tokens)
        out: torch.Tensor | None = None
        for rows in length_buckets(lengths.tolist(), bucket_overhead(self.device)):
            idx = torch.tensor(rows, dtype=torch.long)
            emb = encode_cut_tokens(self.model, tokens[idx, :int(lengths[idx].max())].to(self.device)).float()
            if out is None:
                out = emb.new_empty((len(tokens), emb.shape[1]))
            out[idx.to(emb.device)] = emb
        assert out is not None
        return F.normalize(out, dim=-1)

    def image_features(self, pixels: torch.Tensor) -> torch.Tensor:
        """The image tower's output (not normalised), in the layout `sequence_first` picks."""
        with sequence_first(self.model, self.device):
            features: torch.Tensor = self.model.encode_image(pixels.to(self.device))  # open_clip: untyped
        return features

    def encode_image(self, pixels: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.image_features(pixels).float(), dim=-1)


@declared.OPEN_CLIP
def clip(options: ModelOptions) -> OpenClipModel:
    """open_clip CLIP: ViT-B-32/openai unless --arch/--pretrained/--checkpoint say otherwise."""
    return OpenClipModel.create("clip", options)
