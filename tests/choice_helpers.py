"""A fake model whose cosine with each image is chosen by the test, and image writers for the readers' tests."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from negharness.api import EmbeddingModel
from negharness.api import TaskOptions
from negharness.engine.runner import CachedEvalContext, RunSettings

COLOUR_AXES = {"red": 0, "green": 1, "blue": 2}
RGB = {"red": (255, 0, 0), "green": (0, 255, 0), "blue": (0, 0, 255)}


class TableModel(EmbeddingModel):
    """Images embed as the one-hot of their dominant colour; a caption in ``table`` embeds as
    [s_red, s_green, s_blue, rest], so its cosine with a red image is exactly s_red. Captions not in
    the table score 0 with every image. Two captions with equal rows tie exactly."""

    name = "table"
    modalities = frozenset({"text", "image"})

    def __init__(self, table: dict[str, dict[str, float]]) -> None:
        super().__init__()
        self.table = table

    def modules(self) -> list[torch.nn.Module]:
        return []  # no torch modules: nothing to move to a device

    def describe(self) -> dict[str, Any]:
        return {"arch": "table", "rows": sorted((k, sorted(v.items())) for k, v in self.table.items())}

    def preprocess_image(self, image: Any) -> torch.Tensor:
        arr = np.asarray(image.convert("RGB") if hasattr(image, "convert") else image, dtype=np.float32)
        return torch.from_numpy(arr.reshape(-1, 3).mean(0))

    def encode_image(self, pixels: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(pixels.shape[0], 4)
        out[torch.arange(pixels.shape[0]), pixels.argmax(1)] = 1.0
        return out

    def encode_text(self, texts: Sequence[str]) -> torch.Tensor:
        rows = []
        for t in texts:
            sims = [self.table.get(t, {}).get(c, 0.0) for c in COLOUR_AXES]
            rows.append(sims + [math.sqrt(max(0.0, 1 - sum(s * s for s in sims)))])
        return torch.tensor(rows, dtype=torch.float32)


def write_image(path: Path, colour: str, size: int = 16, right: str | None = None) -> Path:
    """A solid JPEG, or with ``right`` its right half in another colour (to check crops)."""
    from PIL import Image

    arr = np.zeros((size, size, 3), dtype=np.uint8)
    arr[:] = RGB[colour]
    if right:
        arr[:, size // 2:] = RGB[right]
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(arr).save(path, quality=95)
    return path


def evaluate(task_cls: type, root: Path, model: EmbeddingModel, **extra: Any):
    """Run one task on one model in this process, as `negharness run` would, without the cache."""
    task = task_cls(TaskOptions(root, **extra))
    missing = [p for p in task.required_files() if not p.exists()]
    assert not missing, missing
    return task.evaluate(CachedEvalContext(model, RunSettings(), None, log_samples=True))


# tiny random transformers models, built offline from configs -------------------------------------
CHAT = ("{% for m in messages %}{{ m['role'].upper() }} {% for c in m['content'] %}{% if c['type'] == 'image' %}"
        "<image> {% else %}{{ c['text'] }} {% endif %}{% endfor %}{% endfor %}"
        "{% if add_generation_prompt %}ASSISTANT {% endif %}")


def word_tokenizer(words: Sequence[str]):
    """A whitespace word-level tokenizer over ``words`` plus specials, letters and chat words."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    base = ["<pad>", "<s>", "</s>", "<unk>", "<image>", "USER", "ASSISTANT", "Question:", "Answer:"]
    extra = [w for w in dict.fromkeys(list("ABCD") + [w for t in words for w in t.split()]) if w not in base]
    vocab = {w: i for i, w in enumerate(base + extra)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>", extra_special_tokens={"image_token": "<image>"})


def tiny_gpt2(folder: Path, words: Sequence[str], seed: int = 0) -> Path:
    from transformers import GPT2Config, GPT2LMHeadModel

    tok = word_tokenizer(words)
    torch.manual_seed(seed)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_embd=16, n_layer=1, n_head=2, n_positions=64,
                                       bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id))
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def tiny_llava(folder: Path, words: Sequence[str], seed: int = 0) -> Path:
    """LLaVA with a 1-layer CLIP vision tower (16 px, 8 px patches: 4 image tokens) and a 1-layer Llama."""
    from transformers import (
        CLIPImageProcessor,
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
    )

    tok = word_tokenizer(words)
    processor = LlavaProcessor(image_processor=CLIPImageProcessor(size={"shortest_edge": 16},
                                                                  crop_size={"height": 16, "width": 16}),
                               tokenizer=tok, patch_size=8, vision_feature_select_strategy="default",
                               num_additional_image_tokens=1, chat_template=CHAT)
    vision = CLIPVisionConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                              image_size=16, patch_size=8)
    text = LlamaConfig(vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                       num_attention_heads=2, num_key_value_heads=2, pad_token_id=tok.pad_token_id)
    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(LlavaConfig(vision_config=vision, text_config=text,
                                                      image_token_index=tok.convert_tokens_to_ids("<image>"),
                                                      image_seq_length=4, vision_feature_select_strategy="default"))
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder


def tiny_qwen2vl(folder: Path, words: Sequence[str], seed: int = 0) -> Path:
    """Qwen2-VL (M-RoPE, patch-merged vision tokens, image_grid_thw) with one layer each side, 56 px images."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import (
        PreTrainedTokenizerFast,
        Qwen2VLConfig,
        Qwen2VLForConditionalGeneration,
        Qwen2VLImageProcessor,
        Qwen2VLProcessor,
        Qwen2VLVideoProcessor,
    )

    specials = ["<pad>", "<s>", "</s>", "<unk>", "<|vision_start|>", "<|image_pad|>", "<|vision_end|>", "<|video_pad|>",
                "USER", "ASSISTANT", "Question:", "Answer:"]
    extra = [w for w in dict.fromkeys(list("ABCD") + [w for t in words for w in t.split()]) if w not in specials]
    vocab = {w: i for i, w in enumerate(specials + extra)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>", extra_special_tokens={
                                       "image_token": "<|image_pad|>", "video_token": "<|video_pad|>",
                                       "vision_start_token": "<|vision_start|>", "vision_end_token": "<|vision_end|>"})
    chat = CHAT.replace("<image> ", "<|vision_start|> <|image_pad|> <|vision_end|> ")
    pixels = 28 * 28 * 4
    processor = Qwen2VLProcessor(image_processor=Qwen2VLImageProcessor(min_pixels=pixels, max_pixels=pixels),
                                 tokenizer=fast, video_processor=Qwen2VLVideoProcessor(), chat_template=chat)
    config = Qwen2VLConfig(
        text_config=dict(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2,
                         rope_scaling={"type": "mrope", "mrope_section": [2, 3, 3]}, bos_token_id=1, eos_token_id=2),
        vision_config=dict(depth=1, embed_dim=16, hidden_size=32, num_heads=2, mlp_ratio=2, patch_size=14,
                           spatial_merge_size=2, temporal_patch_size=2, in_chans=3),
        image_token_id=vocab["<|image_pad|>"], video_token_id=vocab["<|video_pad|>"],
        vision_start_token_id=vocab["<|vision_start|>"], vision_end_token_id=vocab["<|vision_end|>"])
    torch.manual_seed(seed)
    Qwen2VLForConditionalGeneration(config).save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder
