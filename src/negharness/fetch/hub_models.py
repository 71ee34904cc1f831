"""Weights that model loaders read from the Hugging Face hub (open_clip's pretrained tags, transformers
model ids): known before torch loads, and fetched as data is.

Where they land: the Hugging Face cache's own layout (``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else
``~/.cache/huggingface/hub``): ``models--ORG--NAME/blobs/<etag>`` (the bytes, named as the hub names
them: an LFS file's SHA-256, a small file's git blob id), ``snapshots/<commit>/<file>`` linking to the
blob, and ``refs/main`` naming the commit. So open_clip and transformers find them offline with no
change to the loading code, and an online run, which asks the hub for ``main``, finds the blob by its
etag and downloads nothing. Each blob is one `Source` of the repository's folder, fetched by the same
session as data (lock, resume from ``.part``, SHA-256 or git blob id, ``negharness-manifest.json`` in
the repository's folder, which the hub's cache scan ignores).

Known before torch: `TAGS`, the open_clip tags negharness's models default to and the README names,
pinned here because importing open_clip (its own table) imports torch; a test holds each row to
open_clip's live table. Another tag's repository is known only to open_clip: it is not checked before
torch (never a false refusal), and `negharness fetch clip --arch A --pretrained T` reads open_clip's
table for it. A transformers id (``hf_clip --arch ORG/NAME``) names its repository itself.

Pinning: a row with a commit and the file's SHA-256 is held to both; any other repository is asked for
``main`` once, and the commit it answered, with each file's hash as the hub lists it, is recorded in
the manifest: later fetches ask for that commit and hold the files to those hashes.
"""

from __future__ import annotations

import json
import os
import shutil
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from negharness.contracts.errors import UserError
from negharness.contracts.options import env_flag
from negharness.fetch import hub, manifest
from negharness.fetch.sources import Source, human_size

OPEN_CLIP_FILES = ("open_clip_model.safetensors", "open_clip_pytorch_model.bin")  # open_clip's order: safetensors first
HF_DEFAULT = "openai/clip-vit-base-patch32"  # `hf_clip`'s model when none is named
# what transformers' from_pretrained reads: each group one of its files, in its order of preference
HF_NEEDS: tuple[tuple[str, ...], ...] = (
    ("config.json",),
    ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json"),
    ("tokenizer.json", "vocab.json", "spiece.model", "tokenizer.model"),
    ("preprocessor_config.json",))
HF_EXTRAS = ("*.json", "*.txt", "*.model")  # the tokenizer's and processor's other files (merges.txt, ...)
HF_MODELS = {"hf_clip": HF_DEFAULT}  # models that load a transformers id (--arch / -M model), with their default


@dataclass(frozen=True)
class HubFile:
    """One file of a repository at a commit, with the hashes the hub lists for it."""

    path: str
    size: int | None = None
    sha256: str | None = None  # an LFS file's: its name in ``blobs/``
    blob: str | None = None  # a small file's git blob id: its name in ``blobs/``

    @property
    def etag(self) -> str:
        return self.sha256 or self.blob or ""


@dataclass(frozen=True)
class Tag:
    """An open_clip pretrained tag's repository (its ``hf_hub``, with open_clip's default file names),
    pinned to a commit and file where that was checked."""

    repo: str
    revision: str = "main"
    file: HubFile | None = None
    origin: str = ""


_B32_OPENAI = Tag(
    "timm/vit_base_patch32_clip_224.openai", "a6f597a30f7b82c51704746581f9a4e41421e878",
    HubFile("open_clip_model.safetensors", 605_143_284,
            "e6d1bd7789aa45192b3bf90570a789b478bae1b74ebcce7eddd908e83a2b7c31"),
    origin="open_clip 3.3 pretrained.py hf_hub; commit, SHA-256 and size as three public projects pin this file "
           "(not re-downloaded here): a different file is refused")
TAGS: dict[tuple[str, str], Tag] = {
    ("ViT-B-32", "openai"): _B32_OPENAI,
    ("ViT-B-32-quickgelu", "openai"): _B32_OPENAI,
    ("ViT-B-16", "openai"): Tag("timm/vit_base_patch16_clip_224.openai"),
    ("ViT-L-14", "openai"): Tag("timm/vit_large_patch14_clip_224.openai"),
    ("ViT-L-14-336", "openai"): Tag("timm/vit_large_patch14_clip_336.openai"),
    ("ViT-B-32", "laion400m_e31"): Tag("timm/vit_base_patch32_clip_224.laion400m_e31"),
    ("ViT-B-32", "laion400m_e32"): Tag("timm/vit_base_patch32_clip_224.laion400m_e32"),
    ("ViT-B-32", "laion2b_s34b_b79k"): Tag("laion/CLIP-ViT-B-32-laion2B-s34B-b79K"),
}


@dataclass(frozen=True)
class HubModel:
    """What a model reads from one hub repository: one file of each group of ``needs`` (the loader's
    order of preference), plus the top-level files ``extras`` match; ``pinned``: the files known in
    advance at ``revision`` (a commit), so nothing is asked of the hub before the download."""

    label: str  # "ViT-B-32/openai", "openai/clip-vit-base-patch32"
    command: str  # the `negharness fetch` that brings it
    repo: str
    needs: tuple[tuple[str, ...], ...]
    extras: tuple[str, ...] = ()
    revision: str = "main"
    pinned: tuple[HubFile, ...] = ()
    origin: str = ""

    @property
    def shown(self) -> str:
        """"hub REPO: FILE SIZE" for messages: what a run needs, and from where."""
        if self.pinned:
            return f"hub {self.repo}: {', '.join(f'{f.path} {human_size(f.size)}' for f in self.pinned)}"
        return f"hub {self.repo}: {' + '.join(g[0] for g in self.needs)}"

    def url(self) -> str:
        """The hub page of the first file, at the pinned revision: where it would come from."""
        return hub.resolve_url(hub.HubRef("models", self.repo, self.revision,
                                          self.pinned[0].path if self.pinned else self.needs[0][0]))


def is_commit_pin(row: Tag) -> bool:
    """A row whose file is pinned must be pinned to a commit too: a branch moves under a hash."""
    return hub.is_commit(row.revision)


# which model needs what (no torch, no open_clip) -------------------------------------------------
def open_clip_model(arch: str, tag: str, row: Tag) -> HubModel:
    return HubModel(f"{arch}/{tag}", f"negharness fetch clip --arch {arch} --pretrained {tag}", row.repo,
                    (tuple(OPEN_CLIP_FILES),), revision=row.revision, pinned=(row.file,) if row.file else (),
                    origin=row.origin)


def hf_model(model: str, repo: str) -> HubModel:
    return HubModel(repo, f"negharness fetch {model} --arch {repo}", repo, HF_NEEDS, HF_EXTRAS)


def is_hub_id(name: str) -> bool:
    """ORG/NAME, and not a path on this machine: what a loader takes for a hub repository."""
    parts = name.split("/")
    return len(parts) == 2 and all(parts) and not name.startswith((".", "~")) and not Path(name).expanduser().exists()


def needed(model: str, arch: str | None, pretrained: str | None, extra: dict[str, Any]) -> HubModel | None:
    """The hub weights ``model`` reads when given no --checkpoint, where known without torch: the
    built-in ``clip`` (open_clip, ViT-B-32/openai unless --arch/--pretrained say otherwise) for a tag of
    `TAGS`, ``hf_clip`` for a transformers id; None for anything else."""
    if model == "clip":
        arch = arch or "ViT-B-32"
        tag = pretrained or "openai"
        row = TAGS.get((arch, tag))
        return open_clip_model(arch, tag, row) if row and not arch.endswith(".json") else None
    if model in HF_MODELS:
        source = str(extra.get("model") or arch or HF_MODELS[model])
        return hf_model(model, source) if is_hub_id(source) else None
    return None


# the Hugging Face cache, read as the hub's client reads it ---------------------------------------
def hub_cache() -> Path:
    """``$HF_HUB_CACHE`` (or the older ``$HUGGINGFACE_HUB_CACHE``), else ``$HF_HOME/hub``, else
    ``$XDG_CACHE_HOME/huggingface/hub`` or ``~/.cache/huggingface/hub``: as huggingface_hub decides."""
    explicit = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    if explicit:
        return Path(os.path.expandvars(explicit)).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    return Path(os.path.expandvars(home)).expanduser() / "hub"


def repo_folder(repo: str) -> Path:
    return hub_cache() / ("models--" + repo.replace("/", "--"))


def snapshot_folder(repo: str) -> Path | None:
    """The snapshot ``refs/main`` names: where a loader given no revision looks offline."""
    ref = repo_folder(repo) / "refs" / "main"
    try:
        commit = ref.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return repo_folder(repo) / "snapshots" / commit if commit else None


def missing(need: HubModel) -> list[str]:
    """The files of ``need`` a loader would not find offline (the first name of each group lacking)."""
    snap = snapshot_folder(need.repo)
    return [group[0] for group in need.needs if snap is None or not any((snap / f).is_file() for f in group)]


def offline() -> bool:
    """The user said there is no network: ``HF_HUB_OFFLINE`` or ``TRANSFORMERS_OFFLINE`` (huggingface_hub
    reads either), so a loader would not download. The network itself is never probed."""
    return env_flag("HF_HUB_OFFLINE") or env_flag("TRANSFORMERS_OFFLINE")


def refusal(model: str, need: HubModel) -> str:
    """The one line a run gets when ``need`` is neither cached nor downloadable: what, from where, how."""
    lacking = "" if need.pinned else f", lacking {', '.join(missing(need))}"
    return (f"model {model}: its weights {need.label} are not in the Hugging Face cache {hub_cache()} ({need.shown}"
            f"{lacking}, from {need.url()}) and downloads are off "
            f"(HF_HUB_OFFLINE/TRANSFORMERS_OFFLINE): run `{need.command}` where there is a network and copy "
            f"{repo_folder(need.repo)} here, or pass --checkpoint PATH")


# fetching into that layout --------------------------------------------------------------------------
FETCHABLE = ("clip", *HF_MODELS)  # `negharness fetch` patterns that name hub weights (with --arch/--pretrained)


def named_in(patterns: list[str], arch: str | None, pretrained: str | None) -> list[HubModel]:
    """The hub weights a `negharness fetch` names: ``clip`` and ``hf_clip``, with --arch/--pretrained,
    which say nothing without one of them (and are one model's: refused with two)."""
    named = [p for p in dict.fromkeys(patterns) if p in FETCHABLE]
    if (arch or pretrained) and len(named) != 1:
        raise UserError("negharness fetch: --arch/--pretrained say which hub weights of one model to fetch: "
                        f"name {' or '.join(FETCHABLE)} once (negharness fetch clip --arch ViT-B-32 --pretrained openai)")
    if pretrained and named != ["clip"]:
        raise UserError(f"negharness fetch {named[0]} --pretrained {pretrained}: a transformers model is named by "
                        "--arch ORG/NAME alone")
    return [for_fetch(p, arch, pretrained) for p in named]


def plan_lines(need: HubModel) -> list[str]:
    """For `negharness fetch --list`: each file a fetch of ``need`` brings (or, for a repository not
    pinned here, what it asks the hub for), whether a loader finds it offline, and where it goes."""
    state = "missing" if missing(need) else "in place"
    if need.pinned:
        rows = [f"{need.repo}@{need.revision[:12]}/{f.path}  hub file  {human_size(f.size)}  "
                f"{'sha256' if f.sha256 else 'git blob'}  {state}  {hub.resolve_url(hub.HubRef('models', need.repo, need.revision, f.path))}"
                for f in need.pinned]
        size = human_size(sum(f.size or 0 for f in need.pinned))
    else:
        files = " + ".join("|".join(g) for g in need.needs) + (f" + {' '.join(need.extras)}" if need.extras else "")
        rows = [f"{need.repo}@{need.revision}  hub files  {files}  hashes the hub lists, commit pinned at the first "
                f"fetch  {state}  {hub.page(hub.HubRef('models', need.repo, need.revision))}"]
        size = "size listed by the hub when fetched"
    return [*rows, f"{need.label}: Hugging Face cache {repo_folder(need.repo)}; download {size}"]


def for_fetch(model: str, arch: str | None, pretrained: str | None) -> HubModel:
    """What `negharness fetch MODEL --arch A --pretrained T` brings: a row of `TAGS`, else (clip)
    open_clip's own table, read by importing it (this imports torch: only for a tag not pinned here)."""
    if model == "clip":
        arch, tag = arch or "ViT-B-32", pretrained or "openai"
        row = TAGS.get((arch, tag)) or _live_tag(arch, tag)
        return open_clip_model(arch, tag, row)
    if model in HF_MODELS:
        source = arch or HF_MODELS[model]
        if not is_hub_id(source):
            raise UserError(f"negharness fetch {model} --arch {source}: not a hub model id (ORG/NAME)")
        return hf_model(model, source)
    raise UserError(f"negharness fetch {model}: not a model that reads hub weights ({', '.join(['clip', *HF_MODELS])})")


def _live_tag(arch: str, tag: str) -> Tag:
    """open_clip's ``hf_hub`` for arch/tag (its default file names when it names none)."""
    from open_clip.pretrained import get_pretrained_cfg  # lazy: imports torch

    cfg = get_pretrained_cfg(arch, tag) or {}
    where = str(cfg.get("hf_hub") or "")
    if not where:
        url = cfg.get("url") or ""
        raise UserError(f"--arch {arch} --pretrained {tag}: " + (
            f"open_clip downloads it from {url}, not the hub: download it and pass --checkpoint PATH" if url else
            "not a pretrained tag open_clip knows (open_clip.list_pretrained() lists them)"))
    parts = where.split("/")
    repo, file = "/".join(parts[:2]), "/".join(parts[2:])
    if file and file not in OPEN_CLIP_FILES:
        raise UserError(f"--arch {arch} --pretrained {tag}: open_clip reads {file} of hub {repo}; fetch it with "
                        "huggingface-cli download (negharness fetches open_clip's default file names)")
    return Tag(repo, origin="open_clip's live pretrained table")


def listing(repo: str, revision: str) -> tuple[str, list[HubFile]]:
    """The commit ``revision`` names and the repository's files there, with the sizes and hashes the hub
    lists (``/api/models/REPO/revision/REV?blobs=true``, through ``$HF_ENDPOINT``)."""
    from negharness.fetch.download import OfflineError  # lazy: the fetch session's

    url = f"{hub.endpoint()}/api/models/{repo}/revision/{urllib.parse.quote(revision, safe='')}?blobs=true"
    headers = {"User-Agent": "negharness"}
    if key := hub.token():
        headers["Authorization"] = f"Bearer {key}"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=60) as resp:
            data = json.loads(resp.read().decode("utf-8"))
    except urllib.error.HTTPError as exc:
        raise UserError(f"hub {repo}@{revision}: {url} answered HTTP {exc.code} ({exc.reason})"
                        + hub.refused_help(f"{hub.endpoint()}/{repo}/resolve/x", exc.code)) from exc
    except (urllib.error.URLError, OSError) as exc:
        raise OfflineError(f"hub {repo}: cannot list its files at {url} ({getattr(exc, 'reason', exc)})") from exc
    files = [HubFile(s["rfilename"], (s.get("lfs") or {}).get("size", s.get("size")),
                     (s.get("lfs") or {}).get("sha256"), None if s.get("lfs") else s.get("blobId"))
             for s in data.get("siblings", [])]
    return str(data["sha"]), files


def choose(need: HubModel, files: list[HubFile]) -> list[HubFile]:
    """The files of the listing a loader reads: one of each group (the first listed, in the loader's
    order), the shards an index names by pattern, and the top-level files ``extras`` match."""
    by_path = {f.path: f for f in files if "/" not in f.path}
    chosen: dict[str, HubFile] = {}
    for group in need.needs:
        found = next((by_path[name] for name in group if name in by_path), None)
        if found is None:
            raise UserError(f"hub {need.repo}: has none of {', '.join(group)} (is it a model {need.label} loads?)")
        chosen[found.path] = found
        if found.path.endswith(".index.json"):
            stem, ext = found.path[:-len(".index.json")].rsplit(".", 1)
            chosen.update({p: f for p, f in by_path.items() if fnmatchcase(p, f"{stem}-*-of-*.{ext}")})
    chosen.update({p: f for p, f in by_path.items() if any(fnmatchcase(p, g) for g in need.extras)})
    return list(chosen.values())


def sources(need: HubModel, commit: str, files: list[HubFile]) -> list[Source]:
    """Each file as a blob of the repository's folder, at ``commit``, held to the hub's hashes (files of
    the same bytes share one blob, as in the hub's own cache)."""
    unique = {f.etag: f for f in reversed(files) if f.etag}
    return [Source(f"blobs/{f.etag}", f"hf://models/{need.repo}@{commit}/{f.path}", f.sha256, f.size,
                   git_blob=None if f.sha256 else f.blob, origin=need.origin or f"hub {need.repo}@{commit}",
                   licence=f"the terms of hub {need.repo}") for f in reversed(unique.values())]


def plan(need: HubModel) -> tuple[str, list[HubFile]]:
    """The commit and files a fetch of ``need`` brings: the pinned ones, else the commit this folder's
    manifest recorded (asked for again), else ``main`` as the hub answers now."""
    if need.pinned:
        return need.revision, list(need.pinned)
    recorded = (manifest.read_manifest(repo_folder(need.repo)).get(need.label) or {})
    commit, files = listing(need.repo, recorded.get("revision") or need.revision)
    chosen = choose(need, files)
    known = recorded.get("files") or {}
    for f in chosen:
        if known.get(f.path) not in (None, f.etag):
            raise UserError(f"hub {need.repo}@{commit}: {f.path} is listed as {f.etag}, not the {known[f.path]} "
                            "recorded at its first fetch; refused")
    return commit, chosen


def link(need: HubModel, commit: str, files: list[HubFile]) -> Path:
    """``snapshots/<commit>/<file>`` to each blob (a copy where links are not allowed), and ``refs/main``
    to the commit unless its snapshot already holds every file; the manifest records the commit and the
    files' hashes. Returns the snapshot folder."""
    root = repo_folder(need.repo)
    snap = root / "snapshots" / commit
    for f in files:
        target = snap / f.path
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_file():
            continue
        if target.is_symlink():  # dangling
            target.unlink()
        try:
            target.symlink_to(os.path.relpath(root / "blobs" / f.etag, target.parent))
        except OSError:
            shutil.copyfile(root / "blobs" / f.etag, target)
    current = snapshot_folder(need.repo)
    if current is None or not all((current / f.path).is_file() for f in files):
        _write_ref(root / "refs" / "main", commit)
    manifest.record(root, need.label, {"revision": commit, "files": {f.path: f.etag for f in files},
                                       "source": need.command, "complete": True})
    return snap


def _write_ref(path: Path, commit: str) -> None:
    from negharness.io.atomic_files import atomic_write_text  # lazy: only a fetch writes

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, commit)


def fetch(need: HubModel, jobs: int, progress: Any, log: Callable[[str], None]) -> list[Any]:
    """Bring ``need`` into the Hugging Face cache (nothing asked of the hub when a loader would already
    find every file): the session's outcomes, one a file."""
    from negharness.fetch import session  # lazy: the session imports the downloader

    label = Source(f"{need.repo} ({need.label})", need.url())
    if not missing(need):
        return [session.Outcome(label, "present", str(snapshot_folder(need.repo)))]
    if offline():
        raise offline_refusal(need)
    commit, files = plan(need)
    outcomes = session.fetch_sources(sources(need, commit, files), repo_folder(need.repo), jobs, progress, log)
    snap = link(need, commit, files)
    return [*outcomes, session.Outcome(label, "linked", f"{len(files)} files at revision {commit[:12]} in {snap}")]


def offline_refusal(need: HubModel) -> UserError:
    """Offline, a fetch starts nothing: what it would download, from where, into which folder."""
    from negharness.fetch.download import OfflineError  # lazy: the fetch session's

    return OfflineError(f"offline (HF_HUB_OFFLINE/TRANSFORMERS_OFFLINE): cannot download {need.label} ({need.shown}, "
                        f"from {need.url()}) into {repo_folder(need.repo)}; run `{need.command}` where "
                        "there is a network and copy that folder here")
