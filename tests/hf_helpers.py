"""Offline Hugging Face fixtures for the tests: a real CLIP tokenizer from open_clip's bundled BPE."""

import json


def clip_tokenizer_files(folder):
    """CLIP's vocab.json / merges.txt from open_clip's bundled BPE file: a real tokenizer, offline."""
    import gzip

    from open_clip.tokenizer import bytes_to_unicode, default_bpe

    merges = gzip.open(default_bpe()).read().decode("utf-8").split("\n")[1:49152 - 256 - 2 + 1]
    merges = [tuple(m.split()) for m in merges]
    vocab = list(bytes_to_unicode().values())
    vocab = vocab + [v + "</w>" for v in vocab] + ["".join(m) for m in merges] + ["<|startoftext|>", "<|endoftext|>"]
    (folder / "vocab.json").write_text(json.dumps({t: i for i, t in enumerate(vocab)}))
    (folder / "merges.txt").write_text("#version: 0.2\n" + "\n".join(" ".join(m) for m in merges) + "\n")
