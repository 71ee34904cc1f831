"""The world's own part-of-speech tagger: its caption language is closed, so NLTK's tags for every
caption it can write are data shipped with the package, and no world task, option or training set
needs NLTK's tagger data or a network.

The table maps each token's five-token window (two words either side) to the tag NLTK's perceptron
tagger gives it in every world caption containing that window; over the whole language (71,208
video and image captions) no window has two tags, so the lookup reproduces NLTK exactly.
``python -m negharness.world.queries`` rebuilds the table (needs NLTK data, ~40 s) and writes beside it
the hash of what the build read (`build_inputs`: every caption, the window rule, the tokenizer, NLTK's
release and its tokenizer and tagger data) and of the table it made; a test checks that hash against
this machine's inputs (where they differ, a fresh build against the table), and the tags against NLTK
on a sample of captions, wherever NLTK data is present.
A text with any window the table lacks is not the world's: the lookup returns None and the caller tags
it with NLTK.
"""

from __future__ import annotations

import hashlib
import inspect
import itertools
import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator, Sequence

from negharness.api.files import atomic_write_text, hash_open_file
from negharness.text import nltk_resources
from negharness.text.nltk_resources import RESOURCES, add_closed_tagger, ensure_nltk, tokenize

from .scenes import ACTIONS, COLOURS, SHAPES, image_caption_forms, video_caption_forms

WINDOW = 2  # words either side
PACKAGED = Path(__file__).parent / "packaged" / "pos_tags.json"
BUILT_FROM = PACKAGED.with_name("pos_tags.inputs.json")  # {"inputs": build_inputs(), "table": the table's sha256}
MAX_OBJECTS = {"video": 2, "image": 3}


def world_captions() -> Iterator[str]:
    """Every caption the world can write (objects may repeat: a superset of what scenes draw)."""
    nps = [f"a {c} {s}" for c in COLOURS for s in SHAPES]
    for n in range(1, MAX_OBJECTS["video"] + 1):
        for combo in itertools.product(itertools.product(nps, ACTIONS), repeat=n):
            yield from video_caption_forms(combo)
    for n in range(1, MAX_OBJECTS["image"] + 1):
        for nouns in itertools.product(nps, repeat=n):
            yield from image_caption_forms(nouns)


def windows(tokens: Sequence[str]) -> list[str]:
    padded = ["<s>"] * WINDOW + list(tokens) + ["</s>"] * WINDOW
    return [" ".join(padded[i: i + 2 * WINDOW + 1]) for i in range(len(tokens))]


@lru_cache(maxsize=1)
def _table() -> dict[str, str]:
    table: dict[str, str] = json.loads(PACKAGED.read_text(encoding="utf-8"))  # window -> tag, as written
    return table


def world_tags(tokens: Sequence[str]) -> list[str] | None:
    """NLTK's tags for a world caption's tokens, or None when the text is not the world's."""
    table = _table()
    tags = [table.get(w) for w in windows(tokens)]
    return None if any(t is None for t in tags) else tags  # type: ignore[return-value]


def build_table() -> dict[str, str]:
    """Tag every world caption with NLTK (about 100 s) and keep each window's tag; a window with
    two tags would make the lookup inexact, so it is an error."""
    import nltk

    ensure_nltk()
    table: dict[str, str] = {}
    for caption in world_captions():
        tokens = tokenize(caption)
        for window, (_, tag) in zip(windows(tokens), nltk.pos_tag(tokens)):
            if table.setdefault(window, tag) != tag:
                raise ValueError(f"window {window!r} has tags {table[window]} and {tag}: widen WINDOW")
    return dict(sorted(table.items()))


def nltk_data_files(path: str) -> Iterator[tuple[str, bytes]]:
    """(name, bytes) of every file of one NLTK resource where NLTK finds it, a folder or a zip, in name order."""
    import nltk

    pointer = nltk.data.find(path)
    if isinstance(pointer, nltk.data.ZipFilePathPointer):
        names = sorted(n for n in pointer.zipfile.namelist() if n.startswith(pointer.entry) and not n.endswith("/"))
        for name in names:
            yield name[len(pointer.entry):], pointer.zipfile.read(name)
        return
    root = Path(pointer.path)
    for file in sorted(f for f in root.rglob("*") if f.is_file()):
        yield file.relative_to(root).as_posix(), file.read_bytes()


def build_inputs() -> str:
    """sha256 of everything `build_table` reads: every world caption, the window rule and the code that
    tokenises, windows and tags, NLTK's release and the files of its tokenizer and tagger data. Equal to the
    one written beside the shipped table, that table is what a build here would make (seconds, not a build's
    ~40 s of tagging)."""
    import nltk

    ensure_nltk()
    digest = hashlib.sha256()

    def add(part: str | bytes) -> None:
        data = part.encode() if isinstance(part, str) else part
        digest.update(len(data).to_bytes(8, "big") + data)

    for caption in world_captions():
        add(caption)
    add(f"window {WINDOW}|nltk {nltk.__version__}")
    for code in (windows, build_table, tokenize):
        add(inspect.getsource(code))
    add(nltk_resources.SIMPLE_TEXT.pattern)
    for path in RESOURCES.values():
        for name, data in nltk_data_files(path):
            add(f"{path}{name}")
            add(data)
    return digest.hexdigest()


def built_from() -> dict[str, Any]:
    """What the shipped table says it was built from (`BUILT_FROM`)."""
    found: dict[str, Any] = json.loads(BUILT_FROM.read_text(encoding="utf-8"))
    return found


def table_sha() -> str:
    """The shipped table's content hash, as the project hashes every file (`hash_open_file`)."""
    return hash_open_file(PACKAGED)


def write_table() -> Path:
    """Rebuild the shipped table (`python -m negharness.world.queries` does, before the query sets) and say,
    beside it, what it was built from."""
    table = build_table()
    atomic_write_text(PACKAGED, json.dumps(table, separators=(",", ":")) + "\n")
    atomic_write_text(BUILT_FROM, json.dumps({"inputs": build_inputs(), "table": table_sha()}, indent=1) + "\n")
    _table.cache_clear()
    return PACKAGED


add_closed_tagger(world_tags)  # the text builders consult it before NLTK: world text needs no NLTK data
