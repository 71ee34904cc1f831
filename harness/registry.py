"""Name -> lazy factory, per kind (model, task, trainer, editor, detector, trainset), with the plugin that gave it."""

from __future__ import annotations

import fnmatch
import importlib
from dataclasses import dataclass, field
from difflib import get_close_matches
from typing import Any, Callable

from .errors import DuplicateNameError, UnknownNameError, UserError

KINDS = ("model", "task", "trainer", "editor", "detector", "trainset")


@dataclass(frozen=True)
class Entry:
    kind: str
    name: str
    target: str | Callable[..., Any]
    description: str
    plugin: str
    meta: dict[str, Any] = field(default_factory=dict)

    def load(self) -> Callable[..., Any]:
        """Import the target only now, so registration stays free of heavy imports."""
        if callable(self.target):
            return self.target
        module_name, _, attr = self.target.partition(":")
        try:
            obj: Any = importlib.import_module(module_name)
            for part in attr.split(".") if attr else []:
                obj = getattr(obj, part)
        except (ImportError, AttributeError) as exc:
            raise UserError(f"{self.kind} {self.name!r} from plugin {self.plugin!r}: cannot load {self.target!r}: {exc}") from exc
        return obj


class Registry:
    def __init__(self) -> None:
        self._entries: dict[str, dict[str, Entry]] = {k: {} for k in KINDS}

    def add(self, kind: str, name: str, target: str | Callable[..., Any], description: str, plugin: str,
            **meta: Any) -> Entry:
        if kind not in self._entries:
            raise ValueError(f"unknown kind {kind!r}")
        if not name or any(c in name for c in "*?[] "):
            raise UserError(f"plugin {plugin!r}: invalid {kind} name {name!r}")
        existing = self._entries[kind].get(name)
        if existing is not None:
            first, second = sorted([existing.plugin, plugin])
            raise DuplicateNameError(
                f"{kind} name {name!r} is registered by two plugins: {first!r} and {second!r}; "
                f"block one with -p no:{second} (or rename it)")
        entry = Entry(kind, name, target, description, plugin, dict(meta))
        self._entries[kind][name] = entry
        return entry

    def names(self, kind: str) -> list[str]:
        return sorted(self._entries[kind])

    def entries(self, kind: str) -> list[Entry]:
        return [self._entries[kind][n] for n in self.names(kind)]

    def get(self, kind: str, name: str) -> Entry:
        try:
            return self._entries[kind][name]
        except KeyError:
            close = get_close_matches(name, self.names(kind), n=4, cutoff=0.5)
            hint = f"; did you mean {', '.join(close)}?" if close else f"; `negharness list` shows the {kind}s"
            raise UnknownNameError(f"unknown {kind} {name!r}{hint}") from None

    def create(self, kind: str, name: str, options: Any) -> Any:
        """Look ``name`` up and call its factory: what every caller of a plugin does."""
        return self.get(kind, name).load()(options)

    def match(self, kind: str, pattern: str) -> list[Entry]:
        """A glob ('msrvtt3k_*') gives every match, sorted; a plain name gives itself or an error."""
        if not any(c in pattern for c in "*?["):
            return [self.get(kind, pattern)]
        found = [e for e in self.entries(kind) if fnmatch.fnmatchcase(e.name, pattern)]
        if not found:
            raise UnknownNameError(f"no {kind} matches {pattern!r}; `negharness list` shows the {kind}s")
        return found


@dataclass
class Registrar:
    """What a registration hook receives: `Registry.add` bound to one kind and the calling plugin."""

    registry: Registry
    kind: str
    plugin: str

    def add(self, name: str, target: str | Callable[..., Any], description: str = "", **meta: Any) -> Entry:
        return self.registry.add(self.kind, name, target, description, self.plugin, **meta)
