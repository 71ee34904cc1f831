"""open_clip's CLIP tokenizer (`SimpleTokenizer`, the BPE of OpenAI and LAION CLIP) at 7x its speed on a
first pass over 16,384 COCO captions and 17-21x once its memos are filled (perf/bench_tokenizer.py), with
open_clip's ids: its own merges and vocabulary, memoised per word and per space-separated piece, and the
work it repeats per text done once or skipped where provably a no-op.

open_clip's tokenizer costs ~100 us a caption on an H100 host's CPU (8-9k texts/s, the text pipeline's
bottleneck there: ../shared/gpu/gpu_check_run2_h100.log, step 2). Per text it runs ftfy (the largest share), html.unescape
twice, its Unicode regex (the `regex` module), and per word a byte-to-character join, a BPE cache lookup
and a string split before the vocabulary lookups. Here, per text:

- cleaning: a text of printable ASCII without ``&`` (tab and line breaks allowed) is one that ftfy and
  html.unescape leave as it is (ftfy's fixes act on ``&`` entities, ESC sequences, other control
  characters and non-ASCII; ``\\r`` becomes ``\\n``, whitespace either way), so `plain_clean` does only
  the whitespace and lower case; any other text gets open_clip's own cleaning;
- words: for a cleaned text that is ASCII, open_clip's pattern written for ASCII (`ASCII_WORDS`: on
  ASCII, \\p{L} is [A-Za-z], \\p{N} [0-9], and \\s the five controls and space) in the standard `re`
  (2.6x faster than `regex` on COCO captions); a cleaned text that is not ASCII, or that holds a special token's text
  (open_clip's regex matches those first, even inside a run of punctuation), is open_clip's ``encode``;
- pieces: a plain text's pieces between spaces ("dog.", "it's") are memoised whole, their words' ids in
  turn (no match of the word pattern holds whitespace), so the pattern runs once per new piece;
- ids: each word's ids come from a memo filled by open_clip's own byte map, merges and vocabulary; a word
  not in the memo is split by `bpe_pieces`, open_clip's ``bpe`` written for speed (11-14 us a word against
  its 28-34 on 5,898 COCO words: the first pass over a dataset's texts learns every distinct word, ~14 us a
  COCO caption of pure Python, under the GIL, beside the forward).

The ids equal open_clip's on every text of the benchmarks' files and on generated hard cases
(tests/test_fast_tokenizer.py). Hugging Face's `tokenizers` (Rust), built from open_clip's tables, gave
the same ids on 16,384 COCO captions but took 111 us a caption against this memo's 50 (one thread each, same
run, 2 loaded cores; its per-text encoding overhead), so it is not used: no optional dependency either. A tokenizer that is not open_clip's default
`SimpleTokenizer` (SigLIP's and other Hugging Face tokenizers, another cleaning, a reduction mask,
extra special tokens) is left as it is (`fast_tokenizer`).
"""

from __future__ import annotations

import re
from typing import Any, Sequence

import numpy as np
import torch

# open_clip's word pattern after its special tokens (open_clip.tokenizer.SimpleTokenizer.pat), and the
# same on ASCII text: \s in `regex` is Unicode White_Space (tab, LF, VT, FF, CR and space in ASCII;
# not \x1c-\x1f, which the standard re's \s would take)
WORDS = r"""'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+"""
ASCII_WORDS = re.compile(r"'s|'t|'re|'ve|'m|'ll|'d|[a-z]+|[0-9]|[^\t\n\x0b\x0c\r a-z0-9]+", re.IGNORECASE | re.ASCII)
SPECIAL = ("<start_of_text>", "<end_of_text>")
_PLAIN = re.compile(r"[\t\n\r !-%'-~]*")  # printable ASCII but '&', tab and line breaks
MEMO_LIMIT = 1_000_000  # words remembered; past it the memo starts again (bounded memory on odd input)
_UNRANKED = float("inf")


def bpe_pieces(chars: str, ranks: dict[tuple[str, str], int]) -> list[str]:
    """open_clip's ``SimpleTokenizer.bpe`` of one word (its bytes as the byte map's characters), as pieces:
    the last character marked ``</w>``, then, while a neighbouring pair has a rank, every occurrence of the
    lowest-ranked pair merged, left to right (ranks are distinct, so the pair is the one open_clip's ``min``
    picks). One scan for the pair and one for the merge per round, where open_clip builds a set of pairs,
    calls a key function per pair and searches the word with ``index``."""
    word = list(chars[:-1])
    word.append(chars[-1] + "</w>")
    get = ranks.get
    while len(word) > 1:
        best, at = _UNRANKED, -1
        for k in range(len(word) - 1):
            rank = get((word[k], word[k + 1]), _UNRANKED)
            if rank < best:
                best, at = rank, k
        if at < 0:
            break
        first, second = word[at], word[at + 1]
        merged, i, n = word[:at], at, len(word)
        while i < n:
            if i < n - 1 and word[i] == first and word[i + 1] == second:
                merged.append(first + second)
                i += 2
            else:
                merged.append(word[i])
                i += 1
        word = merged
    return word


def plain_chunks(text: str) -> list[str] | None:
    """open_clip's 'lower' cleaning of a text that ftfy and html.unescape leave unchanged, as the pieces its
    single spaces separate; None for any other text."""
    if not _PLAIN.fullmatch(text):
        return None
    return text.lower().split()


def plain_clean(text: str) -> str | None:
    """open_clip's 'lower' cleaning of a text that ftfy and html.unescape leave unchanged; None otherwise."""
    chunks = plain_chunks(text)
    return None if chunks is None else " ".join(chunks)


def fast_tokenizer(tokenizer: Any) -> Any:
    """A `FastClipTokenizer` over ``tokenizer`` where it is open_clip's default `SimpleTokenizer`
    (`is_default_simple`), else ``tokenizer`` itself."""
    if isinstance(tokenizer, FastClipTokenizer) or not is_default_simple(tokenizer):
        return tokenizer
    return FastClipTokenizer(tokenizer)


def is_default_simple(tokenizer: Any) -> bool:
    """Whether ``tokenizer`` is open_clip's `SimpleTokenizer` as `get_tokenizer` makes it for OpenAI and
    LAION CLIP: 'lower' cleaning, no reduction mask, only the two special tokens (so open_clip's regex is
    `WORDS` after them). Any vocabulary: the words' ids come from this tokenizer's own tables."""
    try:
        import open_clip.tokenizer as tk
    except ImportError:
        return False
    return (type(tokenizer) is tk.SimpleTokenizer and tokenizer.clean_fn is tk._clean_lower
            and getattr(tokenizer, "reduction_fn", None) is None
            and tokenizer.pat.pattern == "|".join(SPECIAL) + "|" + WORDS)


class FastClipTokenizer:
    """Callable like open_clip's tokenizer: texts -> (N, context_length) int64, the same ids. Other
    attributes (``encoder``, ``decode``, ``sot_token_id``...) are the wrapped tokenizer's. Safe to call
    from a thread while the model encodes (the memo's reads and writes are single dict operations)."""

    def __init__(self, original: Any) -> None:
        self.original = original
        self.context_length = original.context_length
        self._memo: dict[str, list[int]] = {}
        self._chunks: dict[str, list[int]] = {}  # a plain text's space-separated pieces ("dog.", "it's")

    def __getattr__(self, name: str) -> Any:  # only names not set in __init__
        if "original" not in self.__dict__:  # a copy being built: no attributes yet
            raise AttributeError(name)
        return getattr(self.__dict__["original"], name)

    def word_ids(self, word: str) -> list[int]:
        """One word's ids, open_clip's ``encode`` for one regex match (memoised)."""
        ids = self._memo.get(word)
        if ids is None:
            tk = self.original
            chars = "".join(tk.byte_encoder[b] for b in word.encode("utf-8"))
            ids = [tk.encoder[piece] for piece in bpe_pieces(chars, tk.bpe_ranks)]
            if len(self._memo) >= MEMO_LIMIT:
                self._memo = {}
            self._memo[word] = ids
        return ids

    def encode(self, text: str) -> list[int]:
        """open_clip's ``encode``: one text's ids without start and end tokens. A plain text's pieces between
        spaces are memoised whole: no match of the word pattern holds whitespace, so a text's words are its
        pieces' words in turn, and the pattern runs once per new piece rather than once per text (2-2.5x
        less time a COCO caption warm: 2.9 us against 5.8-7.5)."""
        chunks = plain_chunks(text)
        if chunks is not None:
            if "<" in text and any(s in text.lower() for s in SPECIAL):  # no special token holds whitespace
                return self._whole(text)
            return self._chunk_ids(chunks)
        cleaned = self.original.clean_fn(text)  # ftfy or html.unescape may change it: open_clip's cleaning
        if not cleaned.isascii() or "<" in cleaned and any(s in cleaned.lower() for s in SPECIAL):
            return self._whole(text)
        return self._word_ids(ASCII_WORDS.findall(cleaned))

    def _whole(self, text: str) -> list[int]:
        """open_clip's own ``encode`` (non-ASCII after cleaning, or a special token's text inside)."""
        whole: list[int] = self.original.encode(text)
        return whole

    def _chunk_ids(self, chunks: list[str]) -> list[int]:
        memo, out = self._chunks, []
        for chunk in chunks:
            ids = memo.get(chunk)
            if ids is None:
                ids = self._word_ids(ASCII_WORDS.findall(chunk))
                if len(memo) >= MEMO_LIMIT:
                    memo = self._chunks = {}
                memo[chunk] = ids
            out += ids
        return out

    def _word_ids(self, words: list[str]) -> list[int]:
        memo, out = self._memo, []
        for word in words:
            ids = memo.get(word)
            out += ids if ids is not None else self.word_ids(word)
        return out

    def __call__(self, texts: str | Sequence[str], context_length: int | None = None) -> torch.Tensor:
        """open_clip's ``SimpleTokenizer.__call__``: start token, ids, end token, cut to the context with
        the end token kept last, zero-padded."""
        texts = [texts] if isinstance(texts, str) else texts
        context = context_length or self.context_length
        assert context, "Please set a valid context length"
        out = np.zeros((len(texts), context), dtype=np.int64)
        sot, eot = self.original.sot_token_id, self.original.eot_token_id
        for i, text in enumerate(texts):
            row = [sot, *self.encode(text)[:context - 2], eot] if context >= 2 else [eot]
            out[i, :len(row)] = row
        return torch.from_numpy(out)
