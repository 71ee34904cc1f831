"""The run context: the one way a task or a wrapper plugin reaches other plugins, and what every
protocol (embedding retrieval/MCQ, editing) shares: the model under test, counters, notes, seed.

A task asks ``ctx.plugin("detector", "owlv2")``; a wrapper model's factory asks
``options.plugins.plugin("model", base_name, ...)`` (the run sets ``options.plugins``). Both go
through one `PluginLookup` built from the run's host, so a plugin that only this run's host knows
(a blocked, an extra or an inline plugin) resolves the same way everywhere, and each plugin is
created once per run. There is no global "current host" and no flag read off a model.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from typing import TYPE_CHECKING, Any

from .errors import UserError

if TYPE_CHECKING:
    from .registry import Registry

# What each kind's factory must return; checked where the plugin is made (names plugin and entry).
_BASES = {"model": ("negharness.model", "EmbeddingModel"), "editor": ("negharness.editing", "Editor"),
          "detector": ("negharness.editing", "Detector")}


class Counters(Counter):
    """One tally type for every protocol: ``ctx.counters["edited"] += 1`` or ``ctx.counters.media_encoded``."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return self[name]

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value


def _options_key(options: Any) -> str:
    as_dict = getattr(options, "as_dict", None)
    return json.dumps(as_dict() if as_dict else repr(options), sort_keys=True, default=str)


def check_kind(kind: str, made: Any, entry_label: str) -> Any:
    """A factory that returns the wrong type fails here, naming the plugin, not deep in a run."""
    if kind in _BASES:
        import importlib

        module, cls_name = _BASES[kind]
        base = getattr(importlib.import_module(module), cls_name)
        if not isinstance(made, base):
            raise UserError(f"{entry_label}: its factory returned {type(made).__name__}, not a {module}.{cls_name}")
    return made


class PluginLookup:
    """Plugins by kind and name for one run, each created once per (kind, name, options)."""

    def __init__(self, registry: "Registry", device: Any = None) -> None:
        self.registry = registry
        self.device = device
        self._made: dict[tuple[str, str, str], Any] = {}

    @classmethod
    def installed(cls, device: Any = None) -> "PluginLookup":
        """The installed plugins, for library use outside `negharness run` (a fresh host)."""
        from .plugin_manager import make_host

        return cls(make_host().registry, device)

    def plugin(self, kind: str, name: str, options: Any = None) -> Any:
        if options is None:
            options = self._default_options(kind)
        key = (kind, name, _options_key(options))
        if key not in self._made:
            self._made[key] = self.create(kind, name, options)
        return self._made[key]

    def create(self, kind: str, name: str, options: Any) -> Any:
        """A new instance (not shared): the model under test, or a plugin a caller will change."""
        entry = self.registry.get(kind, name)
        if dataclasses.is_dataclass(options) and any(f.name == "plugins" for f in dataclasses.fields(options)):
            options = dataclasses.replace(options, plugins=self)
        made = check_kind(kind, entry.load()(options), f"{kind} {name!r} from plugin {entry.plugin!r}")
        if self.device is not None and kind == "model":
            made.to(self.device).eval_mode()
        elif self.device is not None and hasattr(made, "to"):
            made.to(self.device)
        return made

    @staticmethod
    def _default_options(kind: str) -> Any:
        from .model import ModelOptions

        return ModelOptions()


class RunContext:
    """What every protocol's context has: the model under test, other plugins, counters and notes."""

    def __init__(self, model: Any, plugins: PluginLookup | None = None, seed: int = 0) -> None:
        self.model = model
        self.seed = seed
        self.counters = Counters()
        self.notes: dict[str, Any] = {}
        self._plugins = plugins

    def plugin(self, kind: str, name: str, options: Any = None) -> Any:
        """Another plugin of this run (a detector, a reference model), created once per run."""
        if self._plugins is None:
            device = getattr(self.model, "device", None)
            self._plugins = PluginLookup.installed(device)
        return self._plugins.plugin(kind, name, options)
