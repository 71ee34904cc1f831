"""Name -> lazy factory, per kind (model, task, trainer, editor, detector, trainset, query_builder, judge),
with the plugin that gave it."""

from __future__ import annotations

import fnmatch
import importlib
import os
from dataclasses import dataclass, field
from difflib import get_close_matches
from typing import Any, Callable, Sequence

from negharness.contracts.errors import DuplicateNameError, PluginLoadError, UnknownNameError, UserError
from negharness.contracts.names import name_problem
from negharness.contracts.options import as_declaration, bind_declared, declaration_drift

KINDS = ("model", "task", "trainer", "editor", "detector", "trainset", "query_builder", "judge")


@dataclass(frozen=True)
class Entry:
    kind: str
    name: str
    target: str | Callable[..., Any]
    description: str
    plugin: str
    meta: dict[str, Any] = field(default_factory=dict)
    # an entry replayed from the plugin index whose hook gave a callable: imports the plugin to get it
    resolve: Callable[[], Callable[..., Any]] | None = field(default=None, compare=False, repr=False)

    def load(self) -> Callable[..., Any]:
        """Import the target only now, so registration stays free of heavy imports. Whatever the
        import raises (a SyntaxError, a native library's OSError) names this entry and its plugin,
        never the model or task of the run that happened to need it. A factory whose options differ
        from the declaration its registration names (``options=``: what the run checked before torch)
        is refused, naming the first difference."""
        if self.resolve is None and callable(self.target):
            factory: Callable[..., Any] = self.target
        else:
            resolve = self.resolve or (lambda: _imported(str(self.target)))
            factory = self._imported(resolve, repr(self.target))
        if "options" in self.meta:  # the registration's declaration and the factory's are one, or refused
            drift = declaration_drift(self.declared(load=False), factory)
            if drift:
                raise PluginLoadError(f"{self._label()}: its registration's options= ({self._options_name()}) and "
                                      f"its factory's takes_options differ: {drift}; decorate the factory with the "
                                      "object options= names, so the two are one")
        return factory

    def declared(self, load: bool = True) -> Any:
        """What declares the options this entry's factory takes (read as `declared_options` reads a
        factory: ``options``, ``passes_rest``, ``wraps``): the `takes_options` declaration its registration
        names (``options="module:attribute"``, kept in a module that imports no torch, or the object
        itself), so a command checks ``-M``, ``-O`` and ``-J`` before torch loads; else, with ``load``, the factory
        itself (its module imported); else None."""
        named = self.meta.get("options")
        if named is None:
            return self.load() if load else None
        found = self._imported(lambda: _imported(named) if isinstance(named, str) else named, repr(named))
        return as_declaration(found, f"{self._label()}: options={self._options_name()}")

    def _imported(self, get: Callable[[], Any], what: str) -> Any:
        """``get()``; whatever it raises but a `UserError` names this entry and its plugin."""
        try:
            return get()
        except UserError:
            raise
        except Exception as exc:
            raise PluginLoadError(f"{self._label()}: cannot load {what}: {type(exc).__name__}: {exc}") from exc

    def _label(self) -> str:
        return f"{self.kind} {self.name!r} from plugin {self.plugin!r}"

    def _options_name(self) -> str:
        named = self.meta.get("options")
        return named if isinstance(named, str) else type(named).__name__


def _imported(target: str) -> Callable[..., Any]:
    """What a ``"module:attribute.path"`` target names: a factory or a task class."""
    module_name, _, attr = target.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split(".") if attr else []:
        obj = getattr(obj, part)
    loaded: Callable[..., Any] = obj
    return loaded


class Registry:
    def __init__(self) -> None:
        self._entries: dict[str, dict[str, Entry]] = {k: {} for k in KINDS}
        self._clashes: dict[tuple[str, str], list[Entry]] = {}  # a name two plugins registered
        self.read_from: dict[str, list[str]] = {}  # plugin -> data files and folders its hooks read (`rests_on`)

    def add(self, kind: str, name: str, target: str | Callable[..., Any], description: str, plugin: str,
            **meta: Any) -> Entry:
        return self.add_entry(Entry(kind, name, target, description, plugin, dict(meta)))

    def add_entry(self, entry: Entry) -> Entry:
        """Where every entry comes in, from a hook or replayed from the plugin index."""
        kind, name, plugin = entry.kind, entry.name, entry.plugin
        if kind not in self._entries:
            raise ValueError(f"unknown kind {kind!r}")
        problem = name_problem(name)
        if problem:  # a look-alike letter would register a second entry with the same look
            raise UserError(f"plugin {plugin!r}: invalid {kind} name {name!r}: {problem}")
        if name in self._entries[kind]:  # kept aside: only a command that uses this name fails
            self._clashes.setdefault((kind, name), [self._entries[kind][name]]).append(entry)
        else:
            self._entries[kind][name] = entry
        return entry

    def names(self, kind: str) -> list[str]:
        return sorted(self._entries[kind])

    def entries(self, kind: str) -> list[Entry]:
        """Every entry, a duplicated name once per plugin that registered it (for `list`)."""
        return [e for n in self.names(kind) for e in self._clashes.get((kind, n), [self._entries[kind][n]])]

    def duplicates(self, kind: str) -> dict[str, list[str]]:
        """Name -> the plugins that registered it, sorted, for each name registered more than once."""
        return {n: sorted(e.plugin for e in found) for (k, n), found in sorted(self._clashes.items()) if k == kind}

    def _duplicate_error(self, kind: str, name: str) -> DuplicateNameError:
        plugins = self.duplicates(kind)[name]
        listed = " and ".join(repr(p) for p in plugins)
        return DuplicateNameError(
            f"{kind} name {name!r} is registered by {len(plugins)} plugins: {listed}; install order must not "
            f"choose: block all but one with -p no:PLUGIN (e.g. -p no:{plugins[-1]}) or uninstall one")

    def get(self, kind: str, name: str) -> Entry:
        if (kind, name) in self._clashes:
            raise self._duplicate_error(kind, name)
        try:
            return self._entries[kind][name]
        except KeyError:
            close = self.close_names(kind, name)
            hint = f"; did you mean {', '.join(close)}?" if close else f"; `negharness list` shows the {kind}s"
            raise UnknownNameError(f"unknown {kind} {name!r}{hint}") from None

    def close_names(self, kind: str, name: str, also: Sequence[str] = ()) -> list[str]:
        """The registered names of ``kind`` (and ``also``) a mistyped ``name`` is close to: every
        "did you mean" of an unknown name says these."""
        return get_close_matches(name, [*self.names(kind), *also], n=4, cutoff=0.5)

    def create(self, kind: str, name: str, options: Any) -> Any:
        """Look ``name`` up and call its factory with ``options`` bound to what it declares
        (`bind_declared`, naming the plugin as registered): what every caller of a plugin does."""
        factory = self.get(kind, name).load()
        return factory(bind_declared(factory, options, name))

    def match(self, kind: str, pattern: str) -> list[Entry]:
        """A glob ('msrvtt3k_*') gives every match, sorted; a plain name gives itself or an error."""
        if not is_glob(pattern):
            return [self.get(kind, pattern)]
        names = [n for n in self.names(kind) if fnmatch.fnmatchcase(n, pattern)]
        if not names:
            raise UnknownNameError(f"no {kind} matches {pattern!r}; `negharness list` shows the {kind}s")
        return [self.get(kind, n) for n in names]


def is_glob(pattern: str) -> bool:
    """Whether a name pattern is a glob ('msrvtt3k_*') rather than a plain name: one rule for every
    command that takes either."""
    return any(c in pattern for c in "*?[")


@dataclass
class Registrar:
    """What a registration hook receives: `Registry.add` bound to one kind and the calling plugin."""

    registry: Registry
    kind: str
    plugin: str

    def add(self, name: str, target: str | Callable[..., Any], description: str = "", **meta: Any) -> Entry:
        return self.registry.add(self.kind, name, target, description, self.plugin, **meta)

    def rests_on(self, path: str | os.PathLike[str]) -> None:
        """A data file or folder this hook read its registrations from (a folder of YAML tasks): the
        plugin index keys the plugin by it too (a folder: by its listing and each file in it), so an
        edit there is seen by the next command instead of the names indexed before."""
        self.registry.read_from.setdefault(self.plugin, []).append(os.path.abspath(path))
