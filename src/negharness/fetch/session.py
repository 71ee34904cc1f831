"""One `negharness fetch`: what is in place is checked, what is missing is downloaded (several at
once, one progress bar), archives unpacked, hashes recorded, manual steps printed.

A file already in place is held to its pin (or its first download's hash); one that differs is
moved aside as ``.rejected`` and fetched anew. Offline, nothing is started: the first file that
would be downloaded is named, with its URL and size.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from negharness.contracts.errors import UserError
from negharness.fetch import hub, manifest, manual
from negharness.fetch.download import (
    Meter,
    OfflineError,
    Transfer,
    download,
    exclusive,
    offline,
    offline_errors,
)
from negharness.fetch.sources import Source
from negharness.fetch.unpack import unpack

DEFAULT_JOBS = 4


@dataclass(frozen=True)
class Outcome:
    source: Source
    state: str  # "present" | "fetched" | "by hand" (steps printed) | "placed by hand" (found and recorded)
    note: str = ""


def _entry(root: Path, source: Source) -> dict[str, Any]:
    return manifest.read_manifest(root).get(source.name) or {}


def in_place(source: Source, root: Path) -> bool:
    """The source's files are where the tasks read them (not yet checked against their hashes)."""
    if source.kind == "manual":
        return manual.in_place(source, root)
    if source.kind == "file":
        return (root / source.name).is_file()
    return bool(_entry(root, source).get("complete")) and (root / (source.done or source.name)).exists()


def _check_present(source: Source, root: Path, log: Callable[[str], None]) -> bool:
    """A file in place that matches its pin or first hash stays; one that differs is moved aside
    (``.rejected``) so it is fetched anew; one never recorded is recorded now."""
    path = root / source.name
    want = manifest.expected_sha256(root, source.name, source.sha256)
    got = manifest.file_sha256(path)
    if want and got != want:
        rejected = path.with_name(path.name + ".rejected")
        path.replace(rejected)
        log(f"{path}: SHA-256 {got[:16]}... is not the expected {want[:16]}...: moved aside to {rejected}, "
            "fetching it anew")
        return False
    if not _entry(root, source):
        _record_file(root, source, path, got, source.url, None)
    return True


def pin_kind(source: Source) -> str:
    """What the file was held to at its first download (the manifest says so, for a reader)."""
    known = [k for k, v in (("sha256", source.sha256), ("md5", source.md5), ("sha1", source.sha1),
                            ("git blob", source.git_blob)) if v]
    return known[0] if known else "first download"


def _record_file(root: Path, source: Source, path: Path, sha: str, url: str, commit: str | None) -> None:
    manifest.record(root, source.name, {
        "file": path.relative_to(root).as_posix(), "sha256": sha, "size": path.stat().st_size, "url": url,
        "pinned": pin_kind(source), "source": source.name,
        **({"revision": commit} if commit else {})})


def _transfer(source: Source, root: Path) -> Transfer:
    """What to download for ``source``: a hub file at the commit its first download recorded."""
    url = source.url
    if hub.is_hub(url):
        ref, revision = hub.parse(url), _entry(root, source).get("revision")
        url = (f"{hub.page(ref)}/tree/{revision or ref.revision} ({', '.join(source.patterns)})"
               if source.kind == "snapshot" else hub.resolve_url(ref, revision))
    want = source.sha256 or (_entry(root, source).get("sha256") if source.kind == "file" else
                             _entry(root, source).get("archive_sha256"))
    lands = root / source.lands
    return Transfer(source.name, url, root / source.target, want, source.md5, source.git_blob, source.size,
                    source.sha1, lands if lands != root / source.target else None, gated_note(source))


def gated_note(source: Source) -> str:
    """For a gated hub source: the terms to accept and the token to give before it downloads."""
    if not (source.gated and hub.is_hub(source.url)):
        return ""
    return (f"gated: accept its terms at {hub.page(hub.parse(source.url))} while signed in, then "
            "`huggingface-cli login` or set HF_TOKEN")


def _other_commit(source: Source, root: Path, commit: str | None) -> str | None:
    """The commit a hub source must come from (recorded at its first download, else the one in its
    URL) when ``commit``, the one the hub answered, is another; else None."""
    if not hub.is_hub(source.url) or not commit:
        return None
    pinned = hub.parse(source.url).revision
    want = _entry(root, source).get("revision") or (pinned if hub.is_commit(pinned) else None)
    return want if want and want != commit else None


def _same_commit(source: Source, root: Path, path: Path, commit: str | None) -> None:
    """A hub file served from another commit than its pin is moved aside and refused."""
    if want := _other_commit(source, root, commit):
        rejected = path.with_name(path.name + ".rejected")
        path.replace(rejected)
        raise UserError(f"{source.name}: the hub served it from commit {commit}, not the pinned {want}; refused and "
                        f"kept aside as {rejected}")


def fetch_one(source: Source, root: Path, meter: Meter) -> Outcome:
    """Download (and unpack, or snapshot) one source; its manifest entry written once it is whole. One
    process at a time (`exclusive`, its lock kept under ``.locks/``: removing a lock file another process
    waits on would let a third one in): a second `negharness fetch` on the same data root waits, then
    finds the source in place instead of writing the same ``.part``."""
    with exclusive(root / ".locks" / source.name.replace("/", "_")):
        if in_place(source, root):
            return Outcome(source, "present")
        return _fetch_one(source, root, meter)


def _fetch_one(source: Source, root: Path, meter: Meter) -> Outcome:
    if source.kind == "snapshot":
        return _snapshot(source, root)
    t = _transfer(source, root)
    got = download(t, meter)
    _same_commit(source, root, got.path, got.commit)
    if source.kind == "file":
        _record_file(root, source, got.path, got.sha256, t.url, got.commit)
        return Outcome(source, "fetched")
    spec = source.unpack
    assert spec is not None  # neither a snapshot nor a single file: an archive, which says how it unpacks
    count = unpack(got.path, root, spec)
    manifest.record(root, source.name, {"archive_sha256": got.sha256, "size": got.size, "url": t.url,
                                        "pinned": pin_kind(source),
                                        "unpacked_into": spec.into, "members": count,
                                        "complete": True, "source": source.name,
                                        **({"revision": got.commit} if got.commit else {})})
    got.path.unlink()
    return Outcome(source, "fetched", f"{count} files unpacked into {root / spec.into}")


def _snapshot(source: Source, root: Path) -> Outcome:
    """A hub snapshot: each file's hash recorded (and checked against the first download's); each
    file at its path in the repository under ``name/`` (straight under it when ``flat``)."""
    ref = hub.parse(source.url)
    entry = _entry(root, source)
    scratch = root / ".downloads" / f"{source.name.replace('/', '_')}-snapshot"
    commit, found = hub.snapshot(ref, entry.get("revision"), source.patterns, scratch)
    if want := _other_commit(source, root, commit):
        raise UserError(f"{source.name}: the hub answered commit {commit}, not the pinned {want}; refused and kept "
                        f"aside in {scratch}")
    known = entry.get("files") or {}
    in_repo = {src: src.relative_to(scratch).as_posix() for src in found}
    rel = {(src.name if source.flat else in_repo[src]): src for src in found}
    hashes = {name: manifest.file_sha256(src) for name, src in rel.items()}
    for name, sha in hashes.items():  # all checked before any is moved into place
        if known.get(name) not in (None, sha):
            raise UserError(f"{source.name}: {name} from hub {ref.repo}@{commit} has SHA-256 {sha}, not the "
                            f"{known[name]} of its first download; refused and kept aside in {scratch}")
    into = root / source.name
    for name, src in rel.items():
        (into / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(src), into / name)
    for name, sha in hashes.items():
        path = into / name
        manifest.record(root, f"{source.name}/{name}", {"file": path.relative_to(root).as_posix(), "sha256": sha,
                                                        "url": hub.resolve_url(replace(ref, path=in_repo[rel[name]]),
                                                                               commit),
                                                        "source": source.name, "pinned": "first download",
                                                        "revision": commit})
    shutil.rmtree(scratch, ignore_errors=True)
    manifest.record(root, source.name, {"revision": commit, "files": hashes, "complete": True, "source": source.name,
                                        "url": source.url})
    return Outcome(source, "fetched", f"{len(rel)} files at revision {commit[:12]} in {into}")


def _placed_by_hand(source: Source, root: Path) -> Outcome:
    """A manual source the user put in place: a single file is hashed (first sight) and held to it."""
    path = manual.target(source, root)
    if path.is_file():
        want = manifest.expected_sha256(root, source.name, source.sha256)
        got = manifest.file_sha256(path)
        if want and got != want:
            raise UserError(f"{path}: SHA-256 {got} is not the {want} it had when first checked; put the "
                            "original file back (or move it aside and follow the steps again)")
        if not _entry(root, source):
            _record_file(root, source, path, got, "", None)
    return Outcome(source, "placed by hand", str(path))


def fetch_sources(sources: list[Source], root: Path, jobs: int = DEFAULT_JOBS, progress: Any = None,
                  log: Callable[[str], None] = print) -> list[Outcome]:
    """Bring every source into ``root``: checked, downloaded, unpacked, recorded. Errors of single
    downloads are gathered and raised together once the others finished (what finished is kept)."""
    if jobs < 1:
        raise UserError(f"--jobs {jobs}: must be at least 1")
    outcomes: list[Outcome] = []
    todo: list[Source] = []
    for s in sources:
        if s.kind == "manual":
            outcomes.append(_placed_by_hand(s, root) if manual.in_place(s, root) else
                            Outcome(s, "by hand", manual.steps(s, root)))
        elif in_place(s, root) and (s.kind != "file" or _check_present(s, root, log)):
            outcomes.append(Outcome(s, "present"))
        else:
            todo.append(s)
    if todo and offline():
        raise offline_errors([_transfer(s, root) for s in todo])
    if todo:
        outcomes += _run_all(todo, root, jobs, Meter(progress, sum(s.size or 0 for s in todo)))
    return outcomes


def _run_all(todo: list[Source], root: Path, jobs: int, meter: Meter) -> list[Outcome]:
    done: list[Outcome] = []
    errors: list[BaseException] = []
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(fetch_one, s, root, meter): s for s in todo}
        for fut in as_completed(futures):
            try:
                done.append(fut.result())
            except Exception as exc:  # the others go on; all failures are reported together
                errors.append(exc)
    if errors:
        unreachable = [e for e in errors if isinstance(e, OfflineError)]
        if unreachable:  # no network: one line, as with HF_HUB_OFFLINE=1
            raise unreachable[0]
        if len(errors) == 1:
            raise errors[0]
        more = "\n".join(str(e).splitlines()[0] for e in errors[1:])
        raise UserError(f"{errors[0]}\n{len(errors) - 1} more failed:\n{more}") from errors[0]
    return done

