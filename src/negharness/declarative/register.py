"""Tasks declared in YAML, registered: each file of a folder read (`negharness.declarative.yaml_reader.read_yaml`)
and checked (`negharness.declarative.spec.parse_spec`, every error naming the file and the key), made a `Task`
subclass with the usual class attributes (name, family, version, modalities, main_score, metric_info, ...), so
a declared task is listed, filtered by glob, cached and recorded exactly as a Python one; suites resolve their
members among the folder's choice tasks.

Users add folders with ``negharness run --include-path DIR``; a plugin package ships YAML and calls
`register_yaml_folder` from its ``negharness_register_tasks`` hook.
"""

from __future__ import annotations

import types
from pathlib import Path
from typing import TYPE_CHECKING, Any

from negharness.contracts.errors import UserError
from negharness.contracts.task import Task
from negharness.declarative.annotations import short
from negharness.declarative.base_task import KNOWN_GENERATORS
from negharness.declarative.group import GroupTask, ImageChoiceTask, MultiChoiceTask
from negharness.declarative.judged import JudgedTask
from negharness.declarative.qrels import QrelsRetrievalTask
from negharness.declarative.spec import parse_spec
from negharness.declarative.tasks import task_class
from negharness.declarative.yaml_reader import read_yaml
from negharness.discovery.hookspecs import hookimpl

if TYPE_CHECKING:
    from negharness.contracts.context import EvalContext


def registration_meta(cls: type[Task]) -> dict[str, Any]:
    """What a YAML task registers beside its name: its family and, where it has them, its papers' tables
    (read by the leaderboard from the registration)."""
    published = cls.spec.get("published") if hasattr(cls, "spec") else None
    return {"family": cls.family, **({"published": tuple(published)} if published else {})}


ITEM_BASES = {"group": GroupTask, "multi_choice": MultiChoiceTask, "image_choice": ImageChoiceTask}


def _base(spec: dict[str, Any]) -> type | None:
    """The task class of the item kinds, of retrieval with qrels and of judged retrieval (the others:
    `tasks.BASES`)."""
    if spec["kind"] == "judged":
        return JudgedTask
    return QrelsRetrievalTask if spec.get("qrels") else ITEM_BASES.get(spec["kind"])


def load_folder(folder: Path, generators: dict[str, Any] | None = None) -> list[type[Task[EvalContext]]]:
    """Task classes of every ``*.yaml`` / ``*.yml`` in ``folder`` (sorted); suites resolve members among them."""
    folder = Path(folder)
    if not folder.is_dir():
        what = "is a file, not a folder (name the folder holding the task YAML files)" if folder.exists() \
            else "no such folder"
        raise UserError(f"--include-path {folder}: {what}")
    specs = [parse_spec(read_yaml(p), str(p), generators) for p in sorted([*folder.glob("*.yaml"), *folder.glob("*.yml")])]
    names: dict[str, str] = {}
    for s in specs:
        if s["name"] in names:
            raise UserError(f"{s['source']}: key 'name': {short(s['name'])} is also declared in {names[s['name']]}")
        names[s["name"]] = s["source"]
    by_name = {s["name"]: s for s in specs}
    classes: dict[str, type[Task[EvalContext]]] = {}
    for s in specs:
        if s["kind"] != "suite":
            classes[s["name"]] = task_class(s, base=_base(s))
    for s in specs:
        if s["kind"] == "suite":
            for metric, member in s["members"].items():
                if by_name.get(member, {}).get("kind") != "choice":
                    raise UserError(f"{s['source']}: key 'members.{metric}': {short(member)} is no choice task in {folder}")
            classes[s["name"]] = task_class(s, {m: classes[t] for m, t in s["members"].items()})
    return [classes[s["name"]] for s in specs]


def register_yaml_folder(registry: Any, folder: Path | Any, generators: dict[str, Any] | None = None) -> list[str]:
    """Register every YAML task in ``folder`` (a path or an ``importlib.resources`` traversable of a
    plugin package) on a hook's registrar; returns the names. Call from ``negharness_register_tasks``."""
    KNOWN_GENERATORS.update(generators or {})
    if hasattr(registry, "rests_on"):  # the plugin index keys the plugin by this folder's files
        registry.rests_on(Path(str(folder)))
    names = []
    for cls in load_folder(Path(str(folder)), generators or {}):
        registry.add(cls.name, cls, cls.description, **registration_meta(cls))
        names.append(cls.name)
    return names


def include_plugin(folders: list[str]) -> Any:
    """A plugin object registering the YAML tasks of ``--include-path`` folders, parsed now so that an
    error in a user's file stops the command with its message (exit 2) instead of a plugin warning."""
    classes = [cls for f in folders for cls in load_folder(Path(f))]

    @hookimpl
    def negharness_register_tasks(registry: Any) -> None:
        for cls in classes:
            registry.add(cls.name, cls, cls.description, **registration_meta(cls))

    return types.SimpleNamespace(negharness_register_tasks=negharness_register_tasks)
