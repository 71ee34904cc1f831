"""The judge of a judged task: a vision-language model that answers a question about an image, named
on the command line (``--judge NAME -J key=value``), planned once and asked through a content-keyed
answer cache.

How ``--judge`` flows: the request carries the name and its ``-J`` options (`RunRequest.judge`,
``judge_options``); `plan_judge` (called by `negharness.engine.plan.make_plan`, before torch) refuses a
judged task without a judge, an unknown judge name or a bad ``-J`` option, and gives each judged task
the judge's identity (its name and the options that name it, `JudgeOptions.identity`), which the task
writes into its config: so the record's variant path and config hash change with the judge, a record
judged by another judge is another record beside it, and reuse compares judges like any task setting.
The model under test keeps its record folder: the judge measures the model, it is not part of it.
`negharness.engine.evaluate.run_evaluation` then builds the judge once (the first judged task that
runs) and hands a `JudgeSession` to each judged task's context as ``ctx.judge``.

A judge plugin (kind ``judge``) is any object with ``describe() -> dict`` and
``answer(items) -> list[str]`` over (image bytes, prompt) pairs (`Judge`); answers come back as the
judge said them, and the task reads them. A judge that also says ``takes_frames = True`` is shown a
video as the list of its sampled frames (PNG bytes each, in time order: the frames the model under test
saw, its ``-M frames`` where given); a video task's judge must be one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Mapping, Protocol, Sequence

from negharness.contracts.errors import UserError
from negharness.contracts.hashing import hash_json
from negharness.contracts.model_options import ModelOptions
from negharness.contracts.options import declared_options
from negharness.discovery.registry import is_glob
from negharness.engine.reuse import judge_sources
from negharness.io.atomic_files import atomic_write_json
from negharness.scoring.judged import MediaItem

ANSWERS_FOLDER = "judge-answers"  # under the run's cache root
ANSWER_FORMAT = 1  # bump when a cached answer's file changes meaning


class Judge(Protocol):
    """What a judge plugin's factory returns."""

    def describe(self) -> dict[str, Any]:
        """What makes its answers what they are (model id, revision, decoding): part of every answer's key."""

    def answer(self, items: Sequence[tuple[bytes | list[bytes], str]]) -> list[str]:
        """One reply per (encoded image, prompt) pair, in order; with ``takes_frames = True``, an item may
        hold a video's frames (a list of encoded images) in the image's place."""


@dataclass
class JudgeOptions(ModelOptions):
    """A judge's ``-J key=value`` options: bound to what its factory declares as ``-M`` is to a model's."""

    FLAG = "-J"
    OWNER = "judge"


@dataclass(frozen=True)
class JudgeChoice:
    """The judge a run names, as planned: registry name, options as given, and the identity that names
    its answers (in every judged task's config, hence its record path and config hash)."""

    name: str
    options: dict[str, str] = field(default_factory=dict)
    identity: dict[str, Any] = field(default_factory=dict)
    # what the options name, by content (`negharness.engine.reuse.judge_sources`): in judged records, for
    # their reuse; never in the label (the record's path) nor in the answers' keys (the judge's own
    # description holds its weights' hash)
    sources: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The judge's name and identity, as a record's notes and the answer cache's keys hold them."""
        return {"name": self.name, "options": dict(sorted(self.identity.items()))}

    def record(self) -> dict[str, Any]:
        """What a judged record says of its judge (``record["judge"]``): name, identity and sources."""
        return {**self.as_dict(), "sources": dict(sorted(self.sources.items()))}

    @property
    def label(self) -> str:
        """What a judged task writes into its config (a leaderboard column's variant says it as is):
        ``hf_vlm_judge(arch=Qwen/Qwen3-VL-4B-Instruct)``, or the bare name without options."""
        options = ", ".join(f"{k}={v}" for k, v in sorted(self.identity.items()))
        return f"{self.name}({options})" if options else self.name


def is_judged(task: Any) -> bool:
    """Whether a task needs a judge: it says so with ``needs_judge = True`` (exactly True: a qrels task's
    ``judged`` property, its relevance judgments, once made every YAML retrieval task look judged)."""
    return getattr(task, "needs_judge", False) is True


def judged_by_glob(tasks: Sequence[tuple[Any, Any]], patterns: Sequence[str], judge: str | None
                   ) -> tuple[list[tuple[Any, Any]], list[Any]]:
    """The run's (entry, task) pairs, and the judged tasks left out of it: without ``--judge``, a judged
    task (`is_judged`, asked of the built task) that a glob matched beside tasks that are not judged
    ('msrvtt3k_*' holds ``msrvtt3k_composed_judged``) stays out of the run, so a glob that ran before a
    judged task was registered runs the same tasks now. A judged task named plainly, or matched by a
    glob whose matches are all judged ('*_judged'), stays in: `plan_judge` then asks for ``--judge``."""
    judged = {entry.name for entry, task in tasks if is_judged(task)}
    if judge is not None or not judged:
        return list(tasks), []
    asked = {p for p in patterns if not is_glob(p)}
    for pattern in filter(is_glob, patterns):
        matched = {entry.name for entry, _ in tasks if fnmatchcase(entry.name, pattern)}
        if matched and matched <= judged:
            asked |= matched
    return ([(e, t) for e, t in tasks if e.name not in judged or e.name in asked],
            [t for e, t in tasks if e.name in judged and e.name not in asked])


def plan_judge(host: Any, judge: str | None, options: Mapping[str, str], tasks: Sequence[Any],
               hasher: Any = None) -> JudgeChoice | None:
    """The run's judge, decided before torch: a judged task without ``--judge`` is refused naming the
    flag; ``-J`` without ``--judge`` likewise; the name must be a registered judge and the options those
    it declares. Each judged task is given the identity (`set_judge`). None when no task is judged and
    no judge was named. ``hasher``: the plan's `FileHasher`, for the files the options name (none: no
    sources, as a caller that never reuses records)."""
    judged = [t for t in tasks if is_judged(t)]
    if judge is None:
        if judged:
            names = ", ".join(t.name for t in judged[:3]) + (" ..." if len(judged) > 3 else "")
            raise UserError(f"task {names} is judged by a vision-language model: name the judge with --judge NAME "
                            "(e.g. --judge hf_vlm_judge -J arch=Qwen/Qwen3-VL-4B-Instruct; `negharness list --kind "
                            "judge` shows them)")
        if options:
            raise UserError(f"-J {next(iter(options))}: give --judge NAME, the judge these options are for")
        return None
    entry = host.registry.get("judge", judge)
    if not judged:  # a judge no task asks is a mistake said, never ignored
        names = ", ".join(t.name for t in tasks[:3]) + (" ..." if len(tasks) > 3 else "")
        raise UserError(f"--judge {judge}: no task of this run is judged ({names}); leave --judge out")
    raw = JudgeOptions(extra=dict(options))
    specs = declared_options(entry.declared()) if options else None  # no plugin module where options= names it
    identity = raw.identity(specs, judge, False) if options else {}
    identity = {k: v for k, v in identity.items() if specs is None or k not in specs or specs[k].changes_numbers}
    choice = JudgeChoice(judge, dict(options), identity)
    if hasher is not None:
        choice = sourced(choice, entry, hasher)
    for task in judged:
        set_judge(task, choice)
    return choice


def sourced(choice: JudgeChoice, entry: Any, hasher: Any) -> JudgeChoice:
    """``choice`` with what its options name hashed now (`negharness.engine.reuse.judge_sources`): the
    options of its identity only (a request knob such as a log file is no judge), a hub id only where the
    judge declares the option ``data_file`` (a model id or folder, not a model served elsewhere). Asked by
    the plan, and again once the judge is built (its first load may have fetched or moved its snapshot),
    for the record."""
    specs = declared_options(entry.declared()) if choice.options else None
    kept = {k: v for k, v in choice.options.items() if k in choice.identity}
    hub = {k for k, spec in (specs or {}).items() if spec.data_file}
    return dataclasses.replace(choice, sources=judge_sources(kept, hub, hasher))


def set_judge(task: Any, choice: JudgeChoice) -> None:
    """Give a judged task its judge's identity: the label its ``config()`` reads (and so its record path
    and config hash), the name and options its notes keep."""
    task.judge = choice.label
    task.judge_identity = choice.as_dict()


class JudgeSession:
    """The run's judge behind its answer cache: ``ask`` answers (image file, prompt) pairs, each answer
    read from ``<cache>/judge-answers/<key[:2]>/<key>.json`` when asked before (key: the image's content
    hash, the prompt, the judge's identity and description), else asked in one batch and written there
    atomically (JSON: never pickle). ``counters``: ``judge_asked`` and ``judge_cached``."""

    def __init__(self, judge: Judge, choice: JudgeChoice, cache_root: Path | None, use_cache: bool = True,
                 hash_file: Any = None) -> None:
        self.judge, self.choice = judge, choice
        self.folder = cache_root / ANSWERS_FOLDER if cache_root is not None and use_cache else None
        self.hash_file = hash_file or _sha256
        self.who = hash_json({"judge": choice.as_dict(), "describe": judge.describe()})
        self.counters: dict[str, int] = {"judge_asked": 0, "judge_cached": 0}

    def ask(self, items: Sequence[tuple[Path | MediaItem, str]]) -> list[str]:
        """Each (image file or video of a pool, prompt) answered, in order; only the ones not cached reach
        the judge."""
        if any(isinstance(shown, MediaItem) for shown, _ in items) and getattr(self.judge, "takes_frames", False) \
                is not True:
            raise UserError(f"judge {self.choice.name!r} answers about one image; this task shows it a video's frames: "
                            "use a judge that takes frames (takes_frames = True: hf_vlm_judge, openai_judge)")
        keys = [self._key(shown, prompt) for shown, prompt in items]
        answers: list[str | None] = [self._cached(k) for k in keys]
        todo = [i for i, a in enumerate(answers) if a is None]
        self.counters["judge_cached"] += len(items) - len(todo)
        if todo:
            asked = [(_shown_bytes(items[i][0]), items[i][1]) for i in todo]
            replies = self.judge.answer(asked)
            if not isinstance(replies, list) or len(replies) != len(todo) or \
                    not all(isinstance(r, str) for r in replies):
                raise UserError(f"judge {self.choice.name!r}: answered {type(replies).__name__} for {len(todo)} "
                                "questions; a judge returns one string per question")
            self.counters["judge_asked"] += len(todo)
            for i, reply in zip(todo, replies):
                answers[i] = reply
                self._store(keys[i], reply)
        return [a for a in answers if a is not None]

    def _key(self, shown: Path | MediaItem, prompt: str) -> str:
        """The answer's cache key: the judge, the prompt and the content shown (an image file's hash; a
        video's frame source hashes with how its frames are sampled and decoded); what cannot be read is
        named, never keyed as "no content"."""
        content = self._content(shown)
        if content is None:
            raise UserError(f"judge {self.choice.name!r}: cannot read {_named(shown)}")
        return hash_json({"format": ANSWER_FORMAT, "judge": self.who, "image": content, "prompt": prompt})

    def _content(self, shown: Path | MediaItem) -> Any:
        """What the judge is shown, as content: a file's hash, or a pool item's (its files' hashes, in
        order, beside the set's recipe; the task's own content key; or its pixels' hash)."""
        if not isinstance(shown, MediaItem):
            return self.hash_file(Path(shown))
        media, j = shown.media, shown.position
        if media.content_keys is not None:
            return {"set": media.key, "content": media.content_keys[j]}
        if media.sources is not None:
            source = media.sources[j]
            files = [source] if isinstance(source, (str, os.PathLike)) else list(source)
            digests = [self.hash_file(Path(f)) for f in files]
            return None if None in digests else {"files": digests, "recipe": media.recipe,
                                                 "part": media.parts[j] if media.parts is not None else None}
        from negharness.store.content import hash_array  # lazy: start-up time (numpy); an in-memory pool only

        return {"pixels": hash_array(media.load(j))}

    def _path(self, key: str) -> Path | None:
        return self.folder / key[:2] / f"{key}.json" if self.folder is not None else None

    def _cached(self, key: str) -> str | None:
        """The cached answer, or None (absent, unreadable or not this key's: asked again)."""
        path = self._path(key)
        if path is None or not path.is_file():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        ok = isinstance(data, dict) and data.get("key") == key and isinstance(data.get("answer"), str)
        return data["answer"] if ok else None

    def _store(self, key: str, answer: str) -> None:
        path = self._path(key)
        if path is not None:
            try:
                atomic_write_json(path, {"key": key, "answer": answer})
            except OSError:  # a cache that cannot be written costs the next run a question, not this run
                pass


def _named(shown: Path | MediaItem) -> str:
    return f"{shown.media.kind} {shown.media.ids[shown.position]}" if isinstance(shown, MediaItem) else f"image {shown}"


def _shown_bytes(shown: Path | MediaItem) -> bytes | list[bytes]:
    """What the judge receives: an image file's bytes as they are, or a video's sampled frames, each
    encoded as PNG (lossless: the pixels the model under test saw)."""
    if not isinstance(shown, MediaItem):
        return Path(shown).read_bytes()
    import numpy as np  # lazy: start-up time

    item = shown.media.load(shown.position)
    frames = [np.asarray(frame) for frame in item] if shown.media.kind == "video" else [np.asarray(item)]
    encoded = [_png(frame) for frame in frames]
    return encoded if shown.media.kind == "video" else encoded[0]


def _png(pixels: Any) -> bytes:
    import numpy as np  # lazy: start-up time
    from PIL import Image  # lazy: start-up time

    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(pixels, dtype=np.uint8)).save(buffer, format="PNG")
    return buffer.getvalue()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
