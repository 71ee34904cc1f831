"""The plugin host: load every ``negharness`` entry point, one by one, and build the registry.

pluggy's own ``load_setuptools_entrypoints`` stops at the first plugin that fails to import; here
each entry point is loaded on its own and a failure is recorded by plugin name, so one broken
third-party package never takes the built-in models down with it (``strict`` turns a failure into
an error). A plugin can be blocked by name, as pytest's ``-p no:name``.

Plugins cost nothing until used. A distribution may declare its entries in entry-point metadata
(groups ``negharness.models``, ``negharness.tasks``, ...: ``name = "module:attribute"``), which is
read without importing anything; and a hook-style plugin (group ``negharness``) is imported once,
after which `negharness.discovery.plugin_index` replays what its hooks added until the installed
distributions or a module file it imported change. One distribution may use both forms: a hook entry
point named as the distribution and its declared entries are one plugin.
"""

from __future__ import annotations

import functools
import importlib.metadata as md
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterable

import pluggy

from negharness.version import HOOK_API
from negharness.contracts.errors import DuplicateNameError, PluginLoadError
from negharness.contracts.options import env_flag
from negharness.discovery import hookspecs
from negharness.discovery.plugin_index import (
    IndexedEntry,
    IndexedPlugin,
    environment_stamp,
    imported_files,
    plugin_key,
    read_files,
    read_index,
    replayable,
    write_index,
)
from negharness.discovery.registry import Entry, Registrar, Registry

ENTRY_POINT_GROUP = "negharness"
HOST_DISTRIBUTION = "negharness"  # its built-in plugins are part of the host: cheap to import, never indexed
_HOOK_KINDS = {
    "negharness_register_models": "model",
    "negharness_register_tasks": "task",
    "negharness_register_trainers": "trainer",
    "negharness_register_editors": "editor",
    "negharness_register_detectors": "detector",
    "negharness_register_trainsets": "trainset",
    "negharness_register_query_builders": "query_builder",
    "negharness_register_judges": "judge",
}


@dataclass
class PluginInfo:
    name: str
    module: str
    distribution: str | None = None
    version: str | None = None
    status: str = "loaded"  # loaded | failed | blocked
    error: str | None = None


def _call_hook(impl: pluggy.HookImpl, registry: Registry, kind: str) -> None:
    """One plugin's registration hook, handed a registrar that attributes its entries to it."""
    impl.function(registry=Registrar(registry, kind, impl.plugin_name))


@dataclass
class PluginHost:
    """Owns the pluggy manager, what was loaded, what failed, and the registry built from it."""

    blocked: frozenset[str] = frozenset()
    strict: bool = False
    plugins: dict[str, PluginInfo] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self._registry: Registry | None = None
        self._index_dir: Path | None = None
        self._path: list[str] = []
        self._indexed: dict[str, tuple[IndexedPlugin, md.EntryPoint]] = {}  # hook plugins replayed, not imported
        self._declared: dict[str, tuple[IndexedEntry, ...]] = {}  # entries from entry-point metadata, by plugin
        self._to_index: dict[str, tuple[str, str]] = {}  # imported plugins to index: name -> (key, top package)
        self._modules_before: set[str] = set()  # sys.modules before the first plugin was imported

    # loading ----------------------------------------------------------------------------------
    def load_entrypoints(self, entry_points: Iterable[md.EntryPoint] | None = None,
                         index_dir: Path | None = None) -> None:
        """Every hook-style plugin, from the index in ``index_dir`` where it holds (no import), else
        imported; then the entries distributions declare in the ``negharness.<kind>s`` groups."""
        eps = md.entry_points(group=ENTRY_POINT_GROUP) if entry_points is None else entry_points
        self._index_dir = index_dir
        self._path = list(sys.path)  # the folders the plugins were found in, stamped again when indexed
        self._modules_before = set(sys.modules)
        index = read_index(index_dir, environment_stamp(self._path)) if index_dir is not None else {}
        for ep in sorted(eps, key=lambda e: e.name):
            info = self._admit(ep.name, ep.value, getattr(ep, "dist", None))
            if info is None:
                continue
            key = self._key(ep, info)
            known = index.get(key) if key else None
            if known is not None:
                self._indexed[info.name] = (known, ep)
            else:
                self._import(ep, info, key)
        if entry_points is None:
            self.load_declared()

    def _admit(self, name: str, module: str, dist: Any) -> PluginInfo | None:
        """The plugin's record; None for a duplicate plugin name (reported) or a blocked plugin."""
        info = PluginInfo(name, module, dist.name if dist else None, dist.version if dist else None)
        if name in self.plugins:  # the second one is reported, the first keeps working
            other = self.plugins[name]
            info.name = f"{name} ({info.distribution or info.module})"
            self.plugins[info.name] = info
            self._fail(info, DuplicateNameError(
                f"plugin name {name!r} is used by two distributions: "
                f"{other.distribution!r} ({other.module}) and {info.distribution!r} ({info.module}); "
                "uninstall one"))
            return None
        self.plugins[name] = info
        if name in self.blocked:
            info.status = "blocked"
            return None
        return info

    def _key(self, ep: md.EntryPoint, info: PluginInfo) -> str | None:
        """The plugin's index key; None where nothing is indexed (no index, or a built-in plugin)."""
        if self._index_dir is None or info.distribution == HOST_DISTRIBUTION:
            return None
        return plugin_key(ep.name, ep.value, info.distribution, info.version)

    def _import(self, ep: md.EntryPoint, info: PluginInfo, key: str | None) -> None:
        """Import a hook plugin and register it; it is indexed (`_remember`) when its module was imported
        here (else what it imported is not known) and it does not opt out. A failure is not indexed."""
        module_name = ep.value.partition(":")[0].strip()
        fresh = module_name not in sys.modules
        try:
            module = ep.load()
        except Exception as exc:  # a broken plugin is reported, never fatal unless strict
            self._fail(info, exc)
            return
        if key and fresh and getattr(module, "NEGHARNESS_INDEX", True) is not False:
            self._to_index[info.name] = (key, module_name.partition(".")[0])
        self._register(module, info)

    def load_declared(self, entry_points: Iterable[md.EntryPoint] | None = None) -> None:
        """Entries declared in entry-point metadata (``[project.entry-points."negharness.models"]``,
        ``mean_colour = "pkg.module:factory"``): names and targets without importing anything. The
        plugin is the distribution; its module is imported when an entry is used."""
        groups = {f"{ENTRY_POINT_GROUP}.{kind}s": kind for kind in _HOOK_KINDS.values()}
        eps = ([ep for group in groups for ep in md.entry_points(group=group)] if entry_points is None
               else list(entry_points))
        by_dist: dict[str, list[md.EntryPoint]] = {}
        for ep in eps:
            dist = getattr(ep, "dist", None)
            by_dist.setdefault(dist.name if dist else ep.value.partition(":")[0], []).append(ep)
        for plugin, found in sorted(by_dist.items()):
            dist = getattr(found[0], "dist", None)
            if not self._same_distribution(plugin, dist) and self._admit(plugin, "entry-point metadata", dist) is None:
                continue
            if self.plugins[plugin].status == "blocked":
                continue
            self._declared[plugin] = tuple(IndexedEntry(groups[ep.group], ep.name, ep.value, "", {})
                                           for ep in sorted(found, key=lambda e: (e.group, e.name))
                                           if ep.group in groups)

    def _same_distribution(self, plugin: str, dist: Any) -> bool:
        """True when ``plugin`` is already a hook plugin of distribution ``dist``: its declared entries
        belong to it (one distribution, both forms), not to a second plugin of the same name."""
        known = self.plugins.get(plugin)
        return known is not None and dist is not None and known.distribution == dist.name

    def register(self, plugin: ModuleType | object, name: str) -> None:
        """Register a plugin object directly (tests, notebooks); it is treated like an entry point."""
        if name in self.blocked:
            self.plugins[name] = PluginInfo(name, repr(plugin), status="blocked")
            return
        info = self.plugins[name] = PluginInfo(name, getattr(plugin, "__name__", repr(plugin)))
        self._register(plugin, info)

    def _register(self, plugin: ModuleType | object, info: PluginInfo) -> None:
        """pluggy's register and check_pending inside the isolation: a hook with a misspelt argument
        or name is reported against its plugin, and the other plugins keep working."""
        try:
            _check_hook_api(plugin)
            self.pm.register(plugin, name=info.name)
        except Exception as exc:
            self._fail(info, exc)
            return
        try:
            self.pm.check_pending()
        except pluggy.PluginValidationError as exc:
            self.pm.unregister(name=info.name)
            self._fail(info, exc)

    def _fail(self, info: PluginInfo, exc: BaseException) -> None:
        info.status = "failed"
        info.error = f"{type(exc).__name__}: {exc}"
        if self.strict:
            raise PluginLoadError(f"plugin {info.name!r} ({info.module}) failed: {info.error}") from exc

    # the registry -----------------------------------------------------------------------------
    @property
    def registry(self) -> Registry:
        if self._registry is None:
            self._registry = self._build_registry()
        return self._registry

    def _build_registry(self) -> Registry:
        """Call each plugin's hooks itself, so every entry is attributed to the plugin that made it
        and one plugin raising in its hook is reported without losing the others' entries; indexed
        and declared plugins are replayed in the same order (by plugin name) without importing them."""
        registry = Registry()
        for hook_name, kind in _HOOK_KINDS.items():
            calls: list[tuple[str, Callable[[], None]]] = [
                (impl.plugin_name, functools.partial(_call_hook, impl, registry, kind))
                for impl in getattr(self.pm.hook, hook_name).get_hookimpls()]
            calls += [(name, functools.partial(self._replay, registry, kind, name, indexed.entries, ep))
                      for name, (indexed, ep) in self._indexed.items()]
            calls += [(name, functools.partial(self._replay, registry, kind, name, entries, None))
                      for name, entries in self._declared.items()]
            for plugin_name, call in sorted(calls, key=lambda c: c[0]):
                try:
                    call()
                except Exception as exc:
                    self._to_index.pop(plugin_name, None)  # a hook that raised is not indexed
                    info = self.plugins.setdefault(plugin_name, PluginInfo(plugin_name, "?"))
                    self._fail(info, exc)
        self._remember(registry)
        return registry

    def _replay(self, registry: Registry, kind: str, plugin_name: str, entries: tuple[IndexedEntry, ...],
                ep: md.EntryPoint | None) -> None:
        """Add a plugin's indexed or declared entries of ``kind`` without importing it."""
        for e in entries:
            if e.kind != kind:
                continue
            resolve = None if e.target is not None else self._live_target(ep, plugin_name, kind, e.name)
            registry.add_entry(Entry(kind, e.name, e.target or f"{ep.value if ep else plugin_name} (a callable)",
                                     e.description, plugin_name, dict(e.meta), resolve))

    def _live_target(self, ep: md.EntryPoint | None, plugin_name: str, kind: str, name: str
                     ) -> Callable[[], Callable[..., Any]]:
        """For an indexed entry whose hook gave a callable: import the plugin and run its hook now."""
        def resolve() -> Callable[..., Any]:
            if ep is None:
                raise PluginLoadError(f"{kind} {name!r}: plugin {plugin_name!r} declares no hook module")
            scratch = PluginHost(strict=True)
            scratch._register(ep.load(), PluginInfo(plugin_name, ep.value))
            target = scratch.registry.get(kind, name).target
            if not callable(target):
                return Entry(kind, name, target, "", plugin_name).load()
            return target
        return resolve

    def _remember(self, registry: Registry) -> None:
        """Index what each imported third-party plugin registered, for the next command, keyed by
        every module file imported since the plugins began to load (`_dependencies`)."""
        if self._index_dir is None or not self._to_index:
            return
        files = imported_files(self._dependencies())
        to_index, self._to_index = self._to_index, {}
        if not files:  # a module file that cannot be stamped: nothing is indexed
            return
        new = {}
        for plugin_name, (key, _) in to_index.items():
            data = read_files(registry.read_from.get(plugin_name, ()))
            if data is None:  # a file it read is gone already: not indexed
                continue
            declared = {(e.kind, e.name) for e in self._declared.get(plugin_name, ())}
            entries = [IndexedEntry(e.kind, e.name, e.target if isinstance(e.target, str) else None,
                                    e.description, e.meta)
                       for kind in _HOOK_KINDS.values() for e in registry.entries(kind)
                       if e.plugin == plugin_name and (kind, e.name) not in declared]
            if replayable(entries):
                new[key] = IndexedPlugin(tuple(entries), tuple(sorted(set(files) | set(data))))
        write_index(self._index_dir, environment_stamp(self._path), new)

    def _dependencies(self) -> set[str]:
        """The modules an indexed plugin's registrations may rest on: every module imported since the
        plugins began to load (by any of them: one may import another's), and every module of an
        indexed plugin's own top-level package, even one imported before (a notebook's)."""
        tops = {top for _, top in self._to_index.values()}
        return {m for m in list(sys.modules) if m not in self._modules_before or m.partition(".")[0] in tops}

    def failures(self) -> list[PluginInfo]:
        return [p for p in self.plugins.values() if p.status == "failed"]

    def distributions(self) -> dict[str, str]:
        """Plugin distribution -> version, for result records."""
        return {p.distribution: p.version or "?" for p in self.plugins.values()
                if p.distribution and p.status == "loaded"}


def _check_hook_api(plugin: ModuleType | object) -> None:

    wanted = getattr(plugin, "NEGHARNESS_HOOK_API", None)
    if wanted is not None and wanted != HOOK_API:
        raise PluginLoadError(f"written for negharness hook API {wanted}; this negharness has hook API {HOOK_API}"
                              + (": upgrade negharness" if isinstance(wanted, int) and wanted > HOOK_API else ""))


def blocked_from_env() -> frozenset[str]:
    raw = os.environ.get("NEGHARNESS_DISABLE_PLUGINS", "")
    return frozenset(x.strip() for x in raw.split(",") if x.strip())


def make_host(blocked: Iterable[str] = (), strict: bool | None = None, cache_dir: str | os.PathLike[str] | None = None,
              **_: Any) -> PluginHost:
    """The host as the CLI builds it: entry points, minus blocked plugins, strictness from env or flag,
    third-party plugins replayed from the index in the cache folder where it holds."""
    from negharness.io.paths import cache_root  # lazy: start-up time

    if strict is None:
        strict = env_flag("NEGHARNESS_STRICT_PLUGINS")
    host = PluginHost(blocked=frozenset(blocked) | blocked_from_env(), strict=strict)
    host.load_entrypoints(index_dir=cache_root(cache_dir))
    return host
