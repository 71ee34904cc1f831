"""Judges (plugin kind ``judge``): a vision-language model that answers a yes/no question about an image,
for judged tasks (`negharness run --judge NAME -J key=value`). Each takes (image bytes, prompt) pairs and
returns the replies as said; the host caches them by content (`negharness.engine.judging`).

Both take a video as its sampled frames (``takes_frames``): one turn holding every frame as an image, in
time order, then the prompt.

- ``hf_vlm_judge``: a transformers image-text-to-text model (``-J arch=Qwen/Qwen3-VL-4B-Instruct``, the
  SimpleNeg authors' judge), greedy decoding of ``-J max_new_tokens=`` (10, as theirs), one image a turn.
- ``openai_judge``: an OpenAI-compatible chat endpoint (what ``vllm serve``, SGLang and llama.cpp's
  server expose): ``-J url=http://127.0.0.1:8000/v1 -J model=NAME``; the image goes as a base64 data
  URL, temperature 0. Requests are bounded: ``-J timeout=`` seconds each, ``-J retries=`` more tries
  on a connection error or a 429/5xx reply (capped), ``-J concurrency=`` at once. A reply without
  ``choices[0].message.content`` as a string is refused by name, never read as an answer. The API key,
  where the server wants one, is read from ``$OPENAI_API_KEY`` and never recorded.
"""

from __future__ import annotations

import base64
import io
import json
import os
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

from negharness.api import ModelOptions, OptionSpec, UserError, takes_options
from negharness.api import PRECISION_NAMES, resolve_precision
from negharness.api import hash_json

MAX_RETRIES = 5
MAX_CONCURRENCY = 64


def _image_mime(data: bytes) -> str:
    """The data URL's type, from the file's first bytes (JPEG, PNG or WebP; JPEG otherwise)."""
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return "image/png"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return "image/jpeg"


def _images(shown: bytes | list[bytes]) -> list[bytes]:
    """An item's images: the one image, or a video's frames in time order."""
    return list(shown) if isinstance(shown, list) else [shown]


class HFVLMJudge:
    """A transformers VLM answering one image (or a video's frames) and prompt at a time (as SimpleNeg's `vqa`)."""

    takes_frames = True  # a video's frames, as images of one turn (`negharness.engine.judging`)

    def __init__(self, processor: Any, vlm: Any, arch: str, max_new_tokens: int = 10, dtype: str = "fp32") -> None:
        self.processor, self.vlm, self.arch = processor, vlm.eval(), arch
        self.max_new_tokens, self.dtype = max_new_tokens, dtype
        self.device: Any = "cpu"
        from negharness.api.checkpoints import hash_processor, hash_state_dict  # lazy: torch's, with a judge only

        # what answers depend on beside the name: the weights (a folder retrained in place, a hub id uploaded
        # again) and how a prompt becomes ids; hashed once, on the weights as loaded (before any move to a GPU)
        self._weights = hash_state_dict(self.vlm.state_dict())
        self._prompting = hash_processor(processor)

    def to(self, device: Any) -> "HFVLMJudge":
        self.vlm.to(device)
        self.device = device
        return self

    def describe(self) -> dict[str, Any]:
        return {"kind": "hf_vlm_judge", "arch": self.arch, "decoding": "greedy", "max_new_tokens": self.max_new_tokens,
                "dtype": self.dtype, "config": hash_json(self.vlm.config.to_dict()),
                "parameters": sum(p.numel() for p in self.vlm.parameters()), "weights": self._weights,
                "processor": self._prompting}

    def chat(self, prompt: str, images: int = 1) -> str:
        """The model's chat template around ``images`` images (one, or a video's frames) and ``prompt``,
        ending where the reply starts."""
        content: list[dict[str, str]] = [{"type": "image"} for _ in range(images)]
        messages = [{"role": "user", "content": [*content, {"type": "text", "text": prompt}]}]
        if getattr(self.processor, "chat_template", None):
            text: str = self.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
            return text
        token = getattr(self.processor, "image_token", "<image>")
        return f"USER: {chr(10).join([token] * images)}\n{prompt} ASSISTANT:"

    def answer(self, items: Sequence[tuple[bytes | list[bytes], str]]) -> list[str]:
        import torch
        from PIL import Image

        out = []
        for shown, prompt in items:
            images = [Image.open(io.BytesIO(data)).convert("RGB") for data in _images(shown)]
            enc = self.processor(text=[self.chat(prompt, len(images))], images=images, return_tensors="pt")
            enc = {k: (v.to(self.device) if torch.is_tensor(v) else v) for k, v in enc.items()}
            with torch.inference_mode():
                ids = self.vlm.generate(**enc, max_new_tokens=self.max_new_tokens, do_sample=False)
            reply = ids[0, enc["input_ids"].shape[1]:]
            out.append(self.processor.batch_decode([reply], skip_special_tokens=True,
                                                   clean_up_tokenization_spaces=False)[0])
        return out


HF_JUDGE_OPTIONS = {
    "arch": OptionSpec(str, None, "a transformers image-text-to-text model id or folder (Qwen/Qwen3-VL-4B-Instruct)",
                       data_file=True),  # its folder's content, or its hub id's local snapshot: judged records' reuse
    "max_new_tokens": OptionSpec(int, 10, "tokens generated per answer (greedy)", minimum=1, maximum=512),
    "dtype": OptionSpec(str, "fp32", "weights' dtype (bf16 for a 4B judge on a GPU)", choices=PRECISION_NAMES),
}


@takes_options(HF_JUDGE_OPTIONS)
def hf_vlm_judge(options: ModelOptions) -> HFVLMJudge:
    e = options.values
    arch = e["arch"] or options.arch
    if not arch:
        raise UserError("judge hf_vlm_judge needs -J arch=MODEL_ID_OR_FOLDER (e.g. Qwen/Qwen3-VL-4B-Instruct)")
    from transformers import AutoModelForImageTextToText, AutoProcessor

    try:
        processor = AutoProcessor.from_pretrained(arch)
        vlm = AutoModelForImageTextToText.from_pretrained(arch, dtype=resolve_precision(e["dtype"], "-J dtype="))
    except (OSError, ValueError) as exc:
        raise UserError(f"-J arch={arch}: cannot load a vision-language model and its processor ({exc})") from exc
    return HFVLMJudge(processor, vlm, arch, e["max_new_tokens"], e["dtype"])


class OpenAIJudge:
    """An OpenAI-compatible ``/chat/completions`` endpoint, asked with bounded requests."""

    takes_frames = True  # a video's frames, as image parts of one turn (`negharness.engine.judging`)

    def __init__(self, url: str, model: str, max_tokens: int = 10, timeout: float = 60.0, retries: int = 2,
                 concurrency: int = 4, api_key: str | None = None) -> None:
        self.url = url.rstrip("/") + "/chat/completions"
        self.model, self.max_tokens, self.timeout = model, max_tokens, timeout
        self.retries, self.concurrency, self.api_key = retries, concurrency, api_key

    def describe(self) -> dict[str, Any]:
        # the endpoint's address is where it runs, not what answers: the served model's name names it
        return {"kind": "openai_judge", "model": self.model, "decoding": "temperature 0", "max_tokens": self.max_tokens}

    def answer(self, items: Sequence[tuple[bytes | list[bytes], str]]) -> list[str]:
        with ThreadPoolExecutor(max_workers=max(1, min(self.concurrency, len(items) or 1))) as pool:
            return list(pool.map(lambda item: self._ask(*item), items))

    def body(self, shown: bytes | list[bytes], prompt: str) -> dict[str, Any]:
        """The request: one user turn, the image (or a video's frames, in order) as data URLs, then the prompt."""
        parts: list[dict[str, Any]] = [
            {"type": "image_url", "image_url": {"url": f"data:{_image_mime(data)};base64,"
                                                       f"{base64.b64encode(data).decode('ascii')}"}}
            for data in _images(shown)]
        return {"model": self.model, "temperature": 0, "max_tokens": self.max_tokens,
                "messages": [{"role": "user", "content": [*parts, {"type": "text", "text": prompt}]}]}

    def _ask(self, shown: bytes | list[bytes], prompt: str) -> str:
        payload = json.dumps(self.body(shown, prompt)).encode("utf-8")
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(min(0.5 * 2 ** (attempt - 1), 8.0))
            request = urllib.request.Request(self.url, data=payload, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    raw = response.read(1 << 20)
            except urllib.error.HTTPError as exc:
                last = f"HTTP {exc.code}"
                if exc.code == 429 or exc.code >= 500:
                    continue
                raise UserError(f"judge openai_judge: {self.url} answered {last} ({exc.reason})") from exc
            except (urllib.error.URLError, OSError) as exc:  # refused, unreachable, timed out
                last = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
                continue
            return self.reply_text(raw)
        raise UserError(f"judge openai_judge: {self.url}: no answer after {self.retries + 1} tries ({last}); "
                        "is the server up (-J url=), and the timeout (-J timeout=) long enough?")

    def reply_text(self, raw: bytes) -> str:
        """``choices[0].message.content`` of a reply; anything else is refused by name."""
        try:
            content = json.loads(raw)["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            content = None
        if not isinstance(content, str):
            raise UserError(f"judge openai_judge: {self.url} sent a malformed reply (no choices[0].message.content "
                            f"string): {raw[:120]!r}")
        return content


OPENAI_JUDGE_OPTIONS = {
    "url": OptionSpec(str, None, "the endpoint's base URL, up to /v1 (http://127.0.0.1:8000/v1)"),
    "model": OptionSpec(str, None, "the served model's name (what the server lists under /v1/models)"),
    "max_tokens": OptionSpec(int, 10, "tokens per answer", minimum=1, maximum=512),
    "timeout": OptionSpec(float, 60.0, "seconds one request may take", minimum=0.1, maximum=3600,
                          changes_numbers=False),
    "retries": OptionSpec(int, 2, "more tries after a connection error or a 429/5xx reply", minimum=0,
                          maximum=MAX_RETRIES, changes_numbers=False),
    "concurrency": OptionSpec(int, 4, "requests at once", minimum=1, maximum=MAX_CONCURRENCY, changes_numbers=False),
}


@takes_options(OPENAI_JUDGE_OPTIONS)
def openai_judge(options: ModelOptions) -> OpenAIJudge:
    e = options.values
    if not e["url"] or not e["model"]:
        raise UserError("judge openai_judge needs -J url=http://HOST:PORT/v1 and -J model=NAME (the served model)")
    if not str(e["url"]).startswith(("http://", "https://")):
        raise UserError(f"-J url={e['url']}: give an http:// or https:// address")
    return OpenAIJudge(e["url"], e["model"], e["max_tokens"], e["timeout"], e["retries"], e["concurrency"],
                       os.environ.get("OPENAI_API_KEY"))
