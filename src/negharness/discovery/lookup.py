"""The one way a task or a wrapper plugin reaches other plugins of a run: `PluginLookup`.

A task asks ``ctx.plugin("detector", "owlv2")``; a wrapper model's factory asks
``options.lookup().plugin("model", base_name, ...)`` (the run sets ``options.plugins``). Both go
through one lookup built from the run's host, so a plugin that only this run's host knows (a
blocked, an extra or an inline plugin) resolves the same way everywhere, and each plugin is created
once per run. There is no global "current host" and no flag read off a model.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from negharness.contracts.editing import Detector, Editor
from negharness.contracts.errors import UserError
from negharness.contracts.model import ModelOptions, ModelPlugin
from negharness.contracts.options import BindsOptions, bind_declared, declared_options, refuse_unknown
from negharness.discovery.manager import make_host
from negharness.discovery.registry import Registry
from negharness.fetch.weights import with_released
from negharness.io.paths import cache_root

# What each kind's factory must return; checked where the plugin is made (names plugin and entry).
_BASES: dict[str, type] = {"model": ModelPlugin, "editor": Editor, "detector": Detector}


def _options_key(options: Any) -> str:
    as_dict = getattr(options, "as_dict", None)
    return json.dumps(as_dict() if as_dict else repr(options), sort_keys=True, default=str)


def check_kind(kind: str, made: Any, entry_label: str) -> Any:
    """A factory that returns the wrong type fails here, naming the plugin, not deep in a run."""
    base = _BASES.get(kind)
    if base is not None and not isinstance(made, base):
        wanted = "EmbeddingModel or negharness.api.ChoiceScorer" if base is ModelPlugin else base.__name__
        raise UserError(f"{entry_label}: its factory returned {type(made).__name__}, not a "
                        f"negharness.api.{wanted}")
    return made


def identity_options(entry: Any, options: Any, registry: Registry | None = None, load: bool = True) -> dict[str, Any]:
    """The options that name the model a registry ``entry`` makes (its record folder, row label and
    config hash): `ModelOptions.identity` against the options its factory declares, so spellings of
    one typed value, and a default given explicitly, name one model; a wrapper's passed-through
    options as the model it wraps names them (`_wrapped_identity`, given the ``registry``). The
    declaration is read where the registration names it (`Entry.declared`: no plugin module, no torch),
    else from the factory, whose module is imported only for ``-M`` options and with ``load`` (without
    it, such options are named as given). An unknown key or a bad value is refused as the factory's
    binder refuses it (`check_options`)."""
    if not isinstance(options, ModelOptions) or not options.extra:
        return _named_as_given(options)
    declared = entry.declared(load)
    if declared is None:
        return _named_as_given(options)
    specs = declared_options(declared)
    named = options.identity(specs, entry.name, bool(getattr(declared, "passes_rest", False)))
    return _wrapped_identity(named, getattr(declared, "wraps", None), specs or {}, options, registry, load, entry.name)


def _named_as_given(options: Any) -> dict[str, Any]:
    """The options as given (`ModelOptions.as_dict`): what names a model no declaration covers."""
    named: dict[str, Any] = options.as_dict()
    return named


def check_options(entry: Any, options: Any, registry: Registry, load: bool = False) -> None:
    """A plugin's ``-M``, ``-J``, ``-O`` or ``-T`` keys and values refused before its module (and torch) is
    imported, where its registration names its declaration (`Entry.declared`; with ``load``, else from
    its factory): what its binder would refuse, in the binder's words (the flag, the key, the plugin, the
    closest name); a wrapper's passed-through keys against the model it wraps, as that model's binder
    would. Options no declaration covers are left to the binder."""
    if isinstance(options, ModelOptions):
        identity_options(entry, options, registry, load)
        return
    declared = entry.declared(load)
    specs = declared_options(declared) if declared is not None else None
    if specs is not None and isinstance(options, BindsOptions):
        options.bind(specs, entry.name, bool(getattr(declared, "passes_rest", False)))


def _wrapped_identity(named: dict[str, Any], wraps: str | None, specs: Any, options: ModelOptions,
                      registry: Registry | None, load: bool = True, wrapper: str = "") -> dict[str, Any]:
    """``named`` with a wrapper's rest (the ``-M`` keys it passes to the model its option ``wraps``
    names) replaced by that model's own identity of them: ``boolean -M base=clip -M quick_gelu=YES``
    and ``=1`` are one model, ``-M base=clip -M jpeg_draft=false`` is ``-M base=clip``. A base this
    registry does not know keeps the rest as given (the run then refuses the name). A key neither the
    wrapper nor its base declares is refused naming both, the closest name from either."""
    rest = {k: v for k, v in options.extra.items() if k not in specs}
    base_name = _base_name(named, wraps, specs, options)
    if not rest or not isinstance(base_name, str) or registry is None or base_name not in registry.names("model"):
        return named
    base_entry = registry.get("model", base_name)
    _refuse_outside(rest, specs, base_entry.declared(load), options, f"model {wrapper!r} or its base {base_name!r}")
    base = identity_options(base_entry, dataclasses.replace(options, extra=rest), registry, load)
    return {**{k: v for k, v in named.items() if k not in rest}, **{k: v for k, v in base.items() if k in rest}}


def _refuse_outside(rest: dict[str, str], specs: Any, base_declared: Any, options: ModelOptions, owner: str) -> None:
    """A passed-on key the base does not take either (it hands on none of its own), refused against the
    union of the wrapper's options and the base's, as the user sees them (``steer -M alpah=...``: did you
    mean alpha?), where the base's binder alone would suggest among its own."""
    base_specs = declared_options(base_declared) if base_declared is not None else None
    if base_specs is None or getattr(base_declared, "passes_rest", False):
        return
    for key in sorted(rest):
        if key not in base_specs:
            refuse_unknown(key, {**specs, **base_specs}, options.FLAG, owner)


def _base_name(named: dict[str, Any], wraps: Any, specs: Any, options: ModelOptions) -> Any:
    """The model a wrapper passes its rest to: the option ``wraps`` names, as bound (a base equal to its
    option's default is dropped from ``named``, not from the run), or what the wrapper's own function of
    its options says (`takes_options`: a fine-tune whose checkpoint names its base)."""
    if callable(wraps):
        try:
            return wraps(options)
        except (OSError, ValueError, UserError):  # the checkpoint unreadable: the run's own error names it
            return None
    return named.get(wraps, getattr(specs.get(wraps), "default", None)) if wraps else None


class PluginLookup:
    """Plugins by kind and name for one run, each created once per (kind, name, options).

    Every command builds its models here (run, fire, diagnose, train, a wrapper's base model), so
    this is where a model named without ``--checkpoint`` gets its authors' released weights
    (`negharness.fetch.weights`), fetched into ``<cache_dir>/models/``."""

    def __init__(self, registry: Registry, device: Any = None, cache_dir: Path | None = None) -> None:
        self.registry = registry
        self.device = device
        self.cache_dir = cache_dir  # None: $NEGHARNESS_CACHE, else the default cache folder
        self._made: dict[tuple[str, str, str], Any] = {}

    @classmethod
    def installed(cls, device: Any = None) -> "PluginLookup":
        """The installed plugins, for library use outside `negharness run` (a fresh host)."""
        return cls(make_host().registry, device)

    def plugin(self, kind: str, name: str, options: Any = None) -> Any:
        if options is None:
            options = ModelOptions()
        key = (kind, name, _options_key(options))
        if key not in self._made:
            self._made[key] = self.create(kind, name, options)
        return self._made[key]

    def resolved(self, kind: str, name: str, options: Any) -> Any:
        """The options a plugin is built with: a model's released weights as its checkpoint where it
        has them and none was given (`negharness run` asks first, to plan its records on them)."""
        if kind != "model" or not isinstance(options, ModelOptions):
            return options
        return with_released(name, options, cache_root(self.cache_dir))

    def identified(self, entry: Any, options: Any) -> tuple[Any, dict[str, Any]]:
        """The options a model ``entry`` is built with (`resolved`: released weights as the checkpoint) and
        the options that name it (`identity_options`, of the options as given: released weights are named
        by their table entry, the model and its ``--pretrained`` tag, never by where a machine caches
        them): every command that files something under a model (run's records, diagnose's picture)
        takes both from here, so they land in one folder."""
        return self.resolved(entry.kind, entry.name, options), identity_options(entry, options, self.registry)

    def create(self, kind: str, name: str, options: Any) -> Any:
        """A new instance (not shared): the model under test, or a plugin a caller will change."""
        entry = self.registry.get(kind, name)
        options = self.resolved(kind, name, options)
        if dataclasses.is_dataclass(options) and not isinstance(options, type) \
                and any(f.name == "plugins" for f in dataclasses.fields(options)):
            options = dataclasses.replace(options, plugins=self)
        factory = entry.load()
        made = check_kind(kind, factory(bind_declared(factory, options, name)),
                          f"{kind} {name!r} from plugin {entry.plugin!r}")
        if self.device is not None and kind == "model":
            made.to(self.device).eval_mode()
        elif self.device is not None and hasattr(made, "to"):
            made.to(self.device)
        return made


def installed_plugins(device: Any = None) -> PluginLookup:
    """The installed plugins as a lookup: what a library caller passes as ``ModelOptions(plugins=...)``."""
    return PluginLookup.installed(device)
