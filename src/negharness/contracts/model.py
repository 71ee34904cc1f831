"""What a retrieval model plugin gives the host: normalised embeddings, preprocessing, a fingerprint.

A plugin subclasses `EmbeddingModel` and implements `encode_text`, `encode_image` and
`preprocess_image`; video encoding, device placement (of the torch modules it holds, see `modules`)
and fingerprint hashing come for free and can be overridden (a temporal head such as CLIP4Clip's
seqTransf overrides `encode_video`).
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Sequence


from negharness.contracts.errors import UserError
from negharness.contracts.hashing import hash_json
from negharness.contracts.model_options import ModelOptions as ModelOptions  # its home is torch-free
from negharness.contracts.sampling import FrameSampling

if TYPE_CHECKING:  # numpy and torch load when a model is built, not when a plugin's module is imported
    import torch

    from negharness.contracts.pixel_transform import PixelTransform


def hash_tokenizer(tokenizer: Any) -> str:
    """Content hash of a transformers tokenizer, what turns a caption into ids: its class, its whole
    definition where it has one (a fast tokenizer's serialised pipeline: vocabulary, merges, normaliser,
    pre-tokeniser, added tokens), else its vocabulary, BPE merges and added tokens, and the length it cuts at.
    A model folder whose tokenizer files were replaced is another model, though its weights are the same."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None and hasattr(backend, "to_str"):
        body = backend.to_str()
    else:
        ranks = getattr(tokenizer, "bpe_ranks", None) or {}
        body = hash_json({"vocab": sorted(tokenizer.get_vocab().items()),
                          "merges": sorted((" ".join(pair), rank) for pair, rank in ranks.items()),
                          "added": sorted((str(k), v) for k, v in getattr(tokenizer, "added_tokens_encoder", {}).items())})
    head = f"{type(tokenizer).__name__}|{getattr(tokenizer, 'model_max_length', None)}|"
    return hashlib.sha256((head + body).encode("utf-8")).hexdigest()[:16]


def hash_processor(processor: Any) -> str:
    """How a transformers processor turns a prompt and images into inputs: its class, its tokenizer's
    content (`hash_tokenizer`), its chat template and its image settings ("none" without a processor)."""
    import json

    if processor is None:
        return "none"
    tokenizer = getattr(processor, "tokenizer", None)
    image = getattr(processor, "image_processor", None)
    return hash_json({"class": type(processor).__name__, "chat_template": getattr(processor, "chat_template", None),
                      "tokenizer": None if tokenizer is None else hash_tokenizer(tokenizer),
                      "image": None if image is None else json.dumps(image.to_dict(), sort_keys=True, default=str)})


def hash_state_dict(state: dict[str, torch.Tensor]) -> str:
    """Content hash of weights: two checkpoints with equal tensors share cached embeddings."""
    import torch

    h = hashlib.sha256()
    for key in sorted(state):
        t = state[key].detach().cpu().contiguous()
        h.update(key.encode())
        h.update(str(t.dtype).encode())
        h.update(str(tuple(t.shape)).encode())
        if t.numel():  # the tensor's own bytes, through the buffer protocol: no copy of the weights
            h.update(t.reshape(-1).view(torch.uint8).numpy().data)
    return h.hexdigest()[:16]


def held_modules(obj: Any) -> list[torch.nn.Module]:
    """The ``torch.nn.Module`` values among ``obj``'s attributes, directly or one level inside a list,
    tuple or dict, each once, in attribute order (`EmbeddingModel.modules`' default)."""
    import torch

    out: dict[int, torch.nn.Module] = {}
    for value in vars(obj).values():
        items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else (value,)
        out.update((id(m), m) for m in items if isinstance(m, torch.nn.Module))
    return list(out.values())


class ModelPlugin(ABC):
    """What every plugin of the ``model`` kind shares, whichever way it scores: its name, the
    modalities it takes, its torch modules (moved to the run's device and put in eval mode by the
    host), its description and fingerprint (the cache and records key on them). Two contracts build
    on it: `EmbeddingModel` (an encoder the host embeds with and scores by cosine) and `ChoiceScorer`
    (a model that scores a choice task's options itself, a generative VLM or a text LM)."""

    name: str = "model"
    modalities: frozenset[str] = frozenset({"text", "image", "video"})
    # set when the user chose a sampling for this model; tasks fall back to their own default
    frame_sampling: FrameSampling | None = None
    # True when no file or tag named the weights and they were drawn at random as the model was built
    # (an architecture alone): every load draws others, so the host never reuses such a record and
    # gives each draw its own record folder and board label
    random_weights: bool = False
    # the revision of the weights where the plugin knows one the host cannot see (a Hugging Face hub
    # commit it downloaded from); the host records it beside the fingerprint. None: the host records
    # the content hash of --checkpoint or of a file or folder an option names, else no revision
    revision: str | None = None

    def __init__(self) -> None:
        import torch

        self.device = torch.device("cpu")

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """Everything that changes a score: architecture, weights hash, activation, preprocessing."""

    def modules(self) -> list[torch.nn.Module]:
        """The torch modules the host moves to the run's device (`to`) and puts in eval mode
        (`eval_mode`): by default every ``torch.nn.Module`` the model holds as an attribute (or in a
        list, tuple or dict attribute). Override to name modules held elsewhere; a model with no torch
        modules at all says so by overriding this to ``return []``. Finding none is an error, never a
        silent model left on the CPU in training mode (dropout on)."""
        found = held_modules(self)
        if not found:
            raise UserError(f"model {self.name} ({type(self).__name__}): holds no torch.nn.Module attribute, so the "
                            "host cannot move it to the device or put it in eval mode; define modules() to return "
                            "its torch modules, or to return [] if it truly has none")
        return found

    def to(self, device: torch.device | str) -> "ModelPlugin":
        import torch

        self.device = torch.device(device)
        for m in self.modules():
            m.to(self.device)
        return self

    def eval_mode(self) -> "ModelPlugin":
        for m in self.modules():
            m.eval()
        return self

    def fingerprint(self) -> str:
        """Short hash of `describe()` (and frame sampling); the embedding cache and records key on it.
        A `describe()` that uses a key of the hash's own (``name``, ``frames``, ``describe``) is hashed
        nested, so nothing it says is overwritten (two models differing only in their ``frames`` entry
        shared a fingerprint, and so cached embeddings); every other keeps the fingerprint it had."""
        sampling = self.frame_sampling.key if self.frame_sampling else None
        described = self.describe()
        if _FINGERPRINT_KEYS & described.keys():
            return hash_json({"name": self.name, "describe": described, "frames": sampling})
        return hash_json({"name": self.name, **described, "frames": sampling})


_FINGERPRINT_KEYS = frozenset({"name", "frames", "describe"})  # the fingerprint's own keys beside describe()'s


class ChoiceScorer(ModelPlugin):
    """A model that scores choice tasks itself (a generative VLM's option likelihood or picked letter,
    a text LM's caption likelihood) and has no embeddings: the host hands it each task's
    `negharness.api.ChoiceSet` and never embeds for it; a retrieval task is refused."""

    scores_choices_itself = True  # what the scorers read; older third-party scorers set it on an EmbeddingModel

    @abstractmethod
    def score_choices(self, choices: Any, batch_size: int, precision: str) -> torch.Tensor:
        """(rows, options) scores of a `negharness.api.ChoiceSet`, higher = more likely true."""


class EmbeddingModel(ModelPlugin):
    """Base of every retrieval model plugin, the encoder contract. All ``encode_*`` outputs are
    L2-normalised float32 (the host checks, `negharness.engine.embedding_contract.EmbeddingContract`)."""

    # -- to implement -------------------------------------------------------------------------
    @abstractmethod
    def encode_text(self, texts: Sequence[str]) -> torch.Tensor:
        """(N, D) normalised text embeddings."""

    @abstractmethod
    def encode_image(self, pixels: torch.Tensor) -> torch.Tensor:
        """(N, D) normalised embeddings of preprocessed images (N, 3, H, W) on ``self.device``."""

    @abstractmethod
    def preprocess_image(self, image: Any) -> torch.Tensor:
        """A PIL image or uint8 (H, W, 3) array -> (3, H, W) float tensor, the model's own transform."""

    # -- provided -----------------------------------------------------------------------------
    def text_batches(self, texts: Sequence[str], batch_size: int) -> list[list[int]]:
        """Which of ``texts`` the host encodes together, as index lists covering each text once.

        Texts of similar length go together (sorted by characters, a proxy for tokens) so a tower that
        pads to the longest text in a batch pads little; the host puts embeddings back in order.
        Override where the model knows its real cost per batch (token lengths, a token budget)."""
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        return [order[lo:lo + batch_size] for lo in range(0, len(order), max(1, batch_size))]

    def prepare_texts(self, texts: Sequence[str]) -> Any:
        """The CPU part of encoding ``texts`` (tokenising), split off so the host runs it for the next
        batch in a thread while this batch encodes. Returns what `encode_prepared` takes, sliceable
        like the texts (the host halves a batch that runs out of memory); must not touch the device.
        Default: the texts themselves, all work left to `encode_text`."""
        return list(texts)

    def encode_prepared(self, prepared: Any) -> torch.Tensor:
        """`encode_text` of texts `prepare_texts` made ready (or a slice of them)."""
        return self.encode_text(prepared)

    def preprocess_video(self, frames: Any) -> torch.Tensor:
        """A sequence of frames (T, H, W, 3 uint8 array or list of images) -> (T, 3, H, W)."""
        import torch

        return torch.stack([self.preprocess_image(f) for f in frames])

    def pixel_transform(self) -> "PixelTransform | None":
        """Where the model asks for it (open_clip's ``-M decode=tensor``), its eval preprocessing as
        tensor ops: the host then decodes image files in batches on the run's device and applies it
        there (`negharness.io.tensor_images`) instead of calling `preprocess_image`. Its pixels differ
        slightly from the PIL transform's, so a model that returns one says so in `describe`."""
        return None

    def preprocess_batch(self, raw: Any, kind: str) -> torch.Tensor:
        """A batch of raw items (e.g. one stacked array) -> (B, 3, H, W) or (B, T, 3, H, W).

        Override with a vectorised path where the raw form allows it; this default goes item by item.
        """
        import torch

        one = self.preprocess_video if kind == "video" else self.preprocess_image
        return torch.stack([one(item) for item in raw])

    def encode_video(self, frames: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Frames (B, T, 3, H, W) through the image tower; normalised mean of normalised frames.

        ``mask`` (B, T) marks real frames, so a short video padded to T is not diluted.
        """
        import torch
        import torch.nn.functional as F

        b, t = frames.shape[:2]
        per_frame = self.encode_image(frames.flatten(0, 1)).view(b, t, -1)
        if mask is None:
            mask = torch.ones(b, t, device=per_frame.device)
        mask = mask.to(per_frame.dtype).unsqueeze(-1)
        pooled = (per_frame * mask).sum(1) / mask.sum(1).clamp_min(1.0)
        return F.normalize(pooled, dim=-1)

    def text_views(self, texts: Sequence[str], parts: Sequence[tuple[str, str] | None] | None = None
                   ) -> dict[str, list[str | None]]:
        """The texts the host embeds (cached, batched) to score these queries, by view name, each
        aligned with ``texts``; None where a query has nothing in that view. Cosine needs the texts
        themselves; the boolean baseline asks for positive and negative parts. ``parts``: per query
        (positive, negative) where the data gives them."""
        return {"text": list(texts)}

    def combine(self, views: dict[str, list[str | None]], embedded: dict[str, torch.Tensor],
                media: torch.Tensor, paired: bool = False) -> torch.Tensor:
        """Scores from the embedded views (rows of None entries are zeros) and media embeddings:
        (Q, N) against every medium, or with ``paired`` (Q,) against ``media[q]`` (MCQ rows).
        Every retrieval and choice task scores through this, so a model that scores differently
        (the boolean baseline) does so in every task, built-in or third-party; nothing here calls back
        into the host."""
        text = embedded["text"]
        return (text * media).sum(-1) if paired else text @ media.t()

    def scoring_notes(self, texts: Sequence[str], parts: Sequence[tuple[str, str] | None] | None = None) -> dict[str, Any]:
        """What a record should say about how this model scored these queries ({} for cosine)."""
        return {}

    def image_cosine(self, a: Any, b: Any) -> float:
        """Cosine of two PIL images' embeddings (NeIn's CLIP-I and DINO scores)."""
        import numpy as np
        import torch

        with torch.inference_mode():
            x = torch.stack([self.preprocess_image(np.asarray(i.convert("RGB"))) for i in (a, b)]).to(self.device)
            e = self.encode_image(x)
            return float((e[0] * e[1]).sum())


def as_encoder(model: ModelPlugin) -> EmbeddingModel:
    """``model`` as the encoder the host embeds with: the one check, for the host's embedding (which
    refuses before encoding) and for the scorers that call encoder methods on a run's model; a
    `ChoiceScorer` (no embeddings) on a task that embeds is refused by name."""
    if not isinstance(model, EmbeddingModel):
        raise UserError(f"model {model.name} scores choice tasks itself (score_choices) and has no "
                        "embeddings: run it on choice tasks (sugarcrepe_*, aro_*, valse_*, crepe_*, ccneg, "
                        "negvqa_*, negbench_mcq_*), not on retrieval tasks")
    return model


def array_to_tensor(image: Any, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor | None:
    """Fast exact path for uint8 (..., H, W, 3) arrays already at the model's size: scale and normalise.

    ``mean``/``std`` are (3, 1, 1) tensors. Returns None when the input is not such an array, so
    the caller falls back to its PIL transform (resize and crop would be identities here).
    """
    import numpy as np

    if not isinstance(image, np.ndarray) or image.dtype != np.uint8 or image.ndim < 3 or image.shape[-1] != 3:
        return None
    import torch

    arr = np.ascontiguousarray(image)
    if not arr.flags.writeable:  # e.g. np.asarray(PIL image): torch wants memory it may write
        arr = arr.copy()
    t = torch.from_numpy(arr).movedim(-1, -3).float().div_(255.0)
    return t.sub_(mean).div_(std)


def jpeg_draft(image: Any, shorter_side: int) -> bool:
    """Let libjpeg decode a not-yet-loaded JPEG at 1/2, 1/4 or 1/8 scale (in the DCT, so decoding
    costs that much less) while its shorter side stays >= ``shorter_side``; the model's own resize
    then finishes. Pixels differ slightly from a full decode (a box-like prefilter), so this is an
    opt-in that models record in their fingerprint. Returns whether the image was reduced."""
    import numpy as np

    if getattr(image, "format", None) != "JPEG" or not getattr(image, "tile", None):  # tile: not decoded yet
        return False
    w, h = image.size
    scale = shorter_side / min(w, h)
    if scale > 0.5:  # no DCT scale keeps the shorter side
        return False
    image.draft("RGB", (max(1, int(np.ceil(w * scale))), max(1, int(np.ceil(h * scale)))))
    return bool(image.size != (w, h))
