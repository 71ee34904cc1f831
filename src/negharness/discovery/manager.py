"""The plugin host: load every ``negharness`` entry point, one by one, and build the registry.

pluggy's own ``load_setuptools_entrypoints`` stops at the first plugin that fails to import; here
each entry point is loaded on its own and a failure is recorded by plugin name, so one broken
third-party package never takes the built-in models down with it (``strict`` turns a failure into
an error). A plugin can be blocked by name, as pytest's ``-p no:name``.
"""

from __future__ import annotations

import importlib.metadata as md
import os
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Iterable

import pluggy

from negharness.version import HOOK_API
from negharness.api.errors import DuplicateNameError, PluginLoadError
from negharness.api.options import env_flag
from negharness.discovery import hookspecs
from negharness.discovery.registry import Registrar, Registry

ENTRY_POINT_GROUP = "negharness"
_HOOK_KINDS = {
    "negharness_register_models": "model",
    "negharness_register_tasks": "task",
    "negharness_register_trainers": "trainer",
    "negharness_register_editors": "editor",
    "negharness_register_detectors": "detector",
    "negharness_register_trainsets": "trainset",
    "negharness_register_query_builders": "query_builder",
}


@dataclass
class PluginInfo:
    name: str
    module: str
    distribution: str | None = None
    version: str | None = None
    status: str = "loaded"  # loaded | failed | blocked
    error: str | None = None


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

    # loading ----------------------------------------------------------------------------------
    def load_entrypoints(self, entry_points: Iterable[md.EntryPoint] | None = None) -> None:
        eps = md.entry_points(group=ENTRY_POINT_GROUP) if entry_points is None else entry_points
        for ep in sorted(eps, key=lambda e: e.name):
            dist = getattr(ep, "dist", None)
            info = PluginInfo(ep.name, ep.value, dist.name if dist else None, dist.version if dist else None)
            if ep.name in self.plugins:  # the second one is reported, the first keeps working
                other = self.plugins[ep.name]
                info.name = f"{ep.name} ({info.distribution or info.module})"
                self.plugins[info.name] = info
                self._fail(info, DuplicateNameError(
                    f"plugin name {ep.name!r} is used by two distributions: "
                    f"{other.distribution!r} ({other.module}) and {info.distribution!r} ({info.module}); "
                    "uninstall one"))
                continue
            self.plugins[ep.name] = info
            if ep.name in self.blocked:
                info.status = "blocked"
                continue
            try:
                module = ep.load()
            except Exception as exc:  # a broken plugin is reported, never fatal unless strict
                self._fail(info, exc)
                continue
            self._register(module, info)

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
        and one plugin raising in its hook is reported without losing the others' entries."""
        registry = Registry()
        for hook_name, kind in _HOOK_KINDS.items():
            impls = getattr(self.pm.hook, hook_name).get_hookimpls()
            for impl in sorted(impls, key=lambda i: i.plugin_name):
                try:
                    impl.function(registry=Registrar(registry, kind, impl.plugin_name))
                except Exception as exc:
                    info = self.plugins.setdefault(impl.plugin_name, PluginInfo(impl.plugin_name, "?"))
                    self._fail(info, exc)
        return registry

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


def make_host(blocked: Iterable[str] = (), strict: bool | None = None, **_: Any) -> PluginHost:
    """The host as the CLI builds it: entry points, minus blocked plugins, strictness from env or flag."""
    if strict is None:
        strict = env_flag("NEGHARNESS_STRICT_PLUGINS")
    host = PluginHost(blocked=frozenset(blocked) | blocked_from_env(), strict=strict)
    host.load_entrypoints()
    return host
