"""CLIP and SigLIP through transformers, by Hugging Face model id or local folder.

Offline, ``from_pretrained`` on a folder without tokenizer files can hand back a near-empty
tokenizer that turns every caption into the same few ids; that is detected and refused, since it
would score every query identically.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any, Protocol, Sequence

import torch
import torch.nn.functional as F

from negharness.api import EmbeddingModel, ModelOptions, UserError
from negharness.api.checkpoints import hash_state_dict, hash_tokenizer, load_or_explain
from negharness.plugins import options as declared
from negharness.plugins.token_lengths import (
    TEXT_ENCODER,
    bucket_overhead,
    length_buckets,
    lengths_pay,
    token_batches,
)

if TYPE_CHECKING:  # transformers loads when a model is built, not when this module is imported
    from transformers import BaseImageProcessor, PreTrainedModel, PreTrainedTokenizerBase
    from transformers.modeling_outputs import BaseModelOutputWithPooling
    from typing_extensions import TypeIs

MIN_VOCAB = 1000


class DualEncoder(Protocol):
    """CLIP's two feature methods, which `HFClipModel` calls on its transformers model (CLIPModel,
    SiglipModel, ...). No transformers base class declares them, so `dual_encoder` checks for both."""

    def get_text_features(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
                          ) -> torch.Tensor | BaseModelOutputWithPooling: ...

    def get_image_features(self, pixel_values: torch.Tensor) -> torch.Tensor | BaseModelOutputWithPooling: ...


def is_dual_encoder(model: object) -> TypeIs[DualEncoder]:
    """Whether ``model`` has both feature methods (type checkers then know it for a `DualEncoder` too)."""
    return hasattr(model, "get_text_features") and hasattr(model, "get_image_features")


def dual_encoder(model: PreTrainedModel, source: str) -> DualEncoder:
    """``model`` as the dual encoder it must be; a UserError naming ``source`` where it is not."""
    if not is_dual_encoder(model):
        raise UserError(f"hf_clip: {source!r} is a {type(model).__name__}, not a CLIP-like dual encoder")
    return model


def _features(out: torch.Tensor | BaseModelOutputWithPooling) -> torch.Tensor:
    """transformers 4 returns a tensor from get_*_features, 5 an output object holding it."""
    if isinstance(out, torch.Tensor):
        return out
    pooled: torch.Tensor | None = out.pooler_output
    if pooled is None:  # every dual encoder of transformers 5 fills it
        raise TypeError(f"{type(out).__name__} holds no pooled features")
    return pooled


class HFClipModel(EmbeddingModel):
    def __init__(self, name_or_path: str, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase,
                 processor: BaseImageProcessor) -> None:
        super().__init__()
        self.name = "hf_clip"
        self.source = name_or_path
        self.towers = dual_encoder(model, name_or_path)  # `model` itself, typed as the feature methods called
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.processor = processor
        self.is_siglip = "siglip" in model.config.model_type
        self._weights = hash_state_dict(model.state_dict())
        self._tokenizer = hash_tokenizer(tokenizer)
        self.text_lengths = "auto"  # -M text_lengths: whether texts run in length buckets, by device (`lengths_pay`)

    def modules(self) -> list[torch.nn.Module]:
        return [self.model]

    def describe(self) -> dict[str, Any]:
        pp = {k: v for k, v in self.processor.to_dict().items() if k in (
            "size", "crop_size", "image_mean", "image_std", "resample", "do_center_crop", "rescale_factor")}
        pp["processor"] = type(self.processor).__name__  # a fast and a slow image processor resize apart
        out = {"source": self.source, "class": type(self.model).__name__, "weights": self._weights, "preprocess": pp,
               "tokenizer": self._tokenizer}
        if not self.is_siglip and self.text_lengths != "off":
            # CLIP texts may run in length buckets (see encode_text): a cache of their own; what the options
            # allow, never the device's choice, so a record keeps its identity from CPU to GPU (as open_clip's)
            out["text_encoder"] = TEXT_ENCODER
        return out

    def on_lengths(self) -> bool:
        """Whether CLIP texts run in length buckets here (SigLIP never: it pads to 64 tokens, as trained):
        on a device where that was measured to pay, as open_clip's texts (`lengths_pay`)."""
        return not self.is_siglip and lengths_pay(self.device, self.text_lengths)

    def preprocess_image(self, image: Any) -> torch.Tensor:
        if not hasattr(image, "convert"):
            from PIL import Image

            image = Image.fromarray(image)
        pixels: torch.Tensor = self.processor(images=image.convert("RGB"), return_tensors="pt")["pixel_values"][0]
        return pixels

    def _context_length(self) -> int:
        """The text tower's positions (transformers types a sub-config as Any: each model has its own)."""
        return int(self.model.config.text_config.max_position_embeddings)

    def _token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        enc = self.tokenizer(list(texts), truncation=True, max_length=self._context_length())
        ids: list[list[int]] = enc["input_ids"]
        return ids

    def text_batches(self, texts: Sequence[str], batch_size: int) -> list[list[int]]:
        """CLIP: sorted by token length, at most ``batch_size`` x context token positions a batch
        (`token_batches`); SigLIP pads every text to 64 tokens, so plain batches."""
        if not self.on_lengths() or not len(texts):
            return super().text_batches(texts, batch_size)
        return token_batches([len(i) for i in self._token_ids(texts)], max(1, batch_size) * self._context_length())

    def encode_text(self, texts: Sequence[str]) -> torch.Tensor:
        """SigLIP: padded to 64 tokens with no mask, as it was trained. CLIP (causal, pooled at the
        end-of-text token), where `on_lengths`: texts of similar length run together, each bucket padded
        to its longest with an attention mask, back in the order given; else the batch padded to its
        longest. Both equal the full context up to rounding."""
        if self.is_siglip:
            enc = self.tokenizer(list(texts), padding="max_length", truncation=True, max_length=64,
                                 return_tensors="pt").to(self.device)
            return F.normalize(_features(self.towers.get_text_features(input_ids=enc["input_ids"])).float(), dim=-1)
        ids = self._token_ids(texts)
        out: torch.Tensor | None = None
        buckets = (length_buckets([len(i) for i in ids], bucket_overhead(self.device)) if self.on_lengths()
                   else [list(range(len(ids)))] if ids else [])  # else one batch, padded to its longest
        for rows in buckets:
            enc = self.tokenizer.pad({"input_ids": [ids[i] for i in rows]}, return_tensors="pt").to(self.device)
            emb = _features(self.towers.get_text_features(input_ids=enc["input_ids"],
                                                          attention_mask=enc["attention_mask"])).float()
            if out is None:
                out = emb.new_empty((len(texts), emb.shape[1]))
            out[torch.tensor(rows, dtype=torch.long, device=emb.device)] = emb
        if out is None:  # no texts
            return torch.empty(0, self.model.config.projection_dim, device=self.device)
        return F.normalize(out, dim=-1)

    def encode_image(self, pixels: torch.Tensor) -> torch.Tensor:
        out = self.towers.get_image_features(pixel_values=pixels.to(self.device))
        return F.normalize(_features(out).float(), dim=-1)


@declared.HF_CLIP
def hf_clip(options: ModelOptions) -> HFClipModel:
    """``--arch`` (or ``-M model=``) is a model id such as openai/clip-vit-base-patch32, or a folder."""
    values = options.values
    source = values["model"] or options.arch or options.checkpoint or "openai/clip-vit-base-patch32"
    from transformers import AutoImageProcessor, AutoModel, AutoTokenizer

    model, tokenizer, processor = load_or_explain("hf_clip", str(source), lambda: (
        AutoModel.from_pretrained(source), AutoTokenizer.from_pretrained(source),
        AutoImageProcessor.from_pretrained(source)), "--arch FOLDER")
    if len(tokenizer) < MIN_VOCAB:
        raise UserError(f"hf_clip: the tokenizer loaded from {source!r} has only {len(tokenizer)} tokens; its "
                        "vocabulary files are missing (offline?). Put the model's tokenizer files in the folder.")
    made = HFClipModel(str(source), model, tokenizer, processor)
    made.frame_sampling = options.frame_sampling()
    made.text_lengths = values["text_lengths"]
    if made.is_siglip and made.text_lengths == "on":
        warnings.warn("-M text_lengths=on: SigLIP pads every text to 64 tokens, as it was trained; ignored",
                      stacklevel=2)
    return made
