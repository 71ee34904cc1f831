"""Hugging Face hub sources, pinned to a revision, through ``$HF_ENDPOINT`` (default huggingface.co).

A single file (``hf://datasets/REPO@REV/PATH``) is a plain HTTP download of the hub's ``resolve``
URL, so it resumes and is verified like any other; a set of files (``patterns``) is a
``huggingface_hub`` snapshot. A source on a moving revision (``main``, the parquet conversion
``refs/convert/parquet``) is pinned at its first download: the commit the hub answered is kept in
the manifest, later fetches ask for it, and an answer from another commit is refused. A gated
dataset (Winoground) needs its terms accepted on the Hub and a token: ``$HF_TOKEN`` or the one
``huggingface-cli login`` saved, sent to the hub's endpoint only.
"""

from __future__ import annotations

import os
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from negharness.contracts.errors import UserError

DEFAULT_ENDPOINT = "https://huggingface.co"


@dataclass(frozen=True)
class HubRef:
    repo_type: str  # "datasets" | "models"
    repo: str
    revision: str
    path: str = ""


def endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def is_hub(url: str) -> bool:
    return url.startswith("hf://")


def parse(url: str) -> HubRef:
    """``hf://datasets/owner/name@rev/path/in/repo`` (``models/`` too; ``@rev`` defaults to main; a
    ``refs/...`` revision such as ``refs/convert/parquet`` takes its three parts)."""
    rest = url[len("hf://"):]
    kind, _, rest = rest.partition("/")
    owner, _, rest = rest.partition("/")
    name_rev, _, path = rest.partition("/")
    name, _, revision = name_rev.partition("@")
    if revision == "refs":  # refs/convert/parquet, refs/pr/3: the revision has slashes of its own
        parts = path.split("/", 2)
        if len(parts) < 2:
            raise UserError(f"{url}: a refs/ revision has three parts (refs/convert/parquet, refs/pr/N)")
        revision, path = "/".join(["refs", *parts[:2]]), (parts[2] if len(parts) > 2 else "")
    if kind not in ("datasets", "models") or not owner or not name:
        raise UserError(f"{url}: expected hf://datasets/OWNER/NAME@REVISION/PATH")
    return HubRef(kind, f"{owner}/{name}", revision or "main", path)


def is_commit(revision: str) -> bool:
    """A full commit id (40 hex digits): a revision that cannot move."""
    return len(revision) == 40 and all(c in "0123456789abcdef" for c in revision)


def page(ref: HubRef) -> str:
    """The repository's page on the hub (where a gated dataset's terms are accepted)."""
    prefix = "" if ref.repo_type == "models" else f"{ref.repo_type}/"
    return f"{endpoint()}/{prefix}{ref.repo}"


def resolve_url(ref: HubRef, revision: str | None = None) -> str:
    """The plain HTTP URL of one file at ``revision`` (the pinned commit, when the manifest has one);
    a revision with slashes is quoted, as the hub's own client does."""
    rev = urllib.parse.quote(revision or ref.revision, safe="")
    return f"{page(ref)}/resolve/{rev}/{ref.path}"


def is_hub_url(url: str) -> bool:
    """An HTTP URL on the hub's endpoint (the only host a token is sent to)."""
    return url.startswith(endpoint() + "/")


def token() -> str | None:
    """``$HF_TOKEN``, else the token ``huggingface-cli login`` saved (when huggingface_hub is there)."""
    if os.environ.get("HF_TOKEN"):
        return os.environ["HF_TOKEN"]
    try:
        from huggingface_hub import get_token  # lazy: optional
    except ImportError:
        return None
    return get_token()


def refused_help(url: str, code: int) -> str:
    """What to do when the hub answers 401/403 for a file: a gated or private repository."""
    if not is_hub_url(url) or code not in (401, 403):
        return ""
    repo = url[len(endpoint()) + 1:].split("/resolve/")[0]
    return (f"; the repository may be gated: accept its terms at {endpoint()}/{repo} while signed in, then "
            "`huggingface-cli login` (or set HF_TOKEN) and run the command again")


def snapshot(ref: HubRef, revision: str | None, patterns: tuple[str, ...], scratch: Path) -> tuple[str, list[Path]]:
    """The files of ``ref`` matching ``patterns`` at ``revision`` (resolved to a commit first),
    downloaded into ``scratch``; the commit and the files, for the caller to verify and move."""
    try:
        import huggingface_hub  # lazy: optional (comes with transformers); only hub sources need it
    except ImportError as exc:
        raise UserError("hub sources need huggingface_hub: pip install huggingface_hub "
                        "(or negharness[hf])") from exc
    commit = _commit(huggingface_hub, ref, revision)
    folder = Path(huggingface_hub.snapshot_download(
        repo_id=ref.repo, repo_type=ref.repo_type.rstrip("s"), revision=commit, allow_patterns=list(patterns),
        local_dir=str(scratch), endpoint=endpoint()))
    found = sorted(p for p in folder.rglob("*") if p.is_file() and ".cache" not in p.relative_to(folder).parts)
    if not found:
        raise UserError(f"hub {ref.repo}@{commit}: no file matches {', '.join(patterns)}")
    return commit, found


def _commit(hub: Any, ref: HubRef, revision: str | None) -> str:
    """The commit a revision names now (a pinned commit stays itself)."""
    api = hub.HfApi(endpoint=endpoint())
    info = (api.dataset_info if ref.repo_type == "datasets" else api.model_info)(ref.repo, revision=revision
                                                                                or ref.revision)
    return str(info.sha)
