"""One parser for every ``KEY=VALUE`` option a plugin takes (``-M`` models, ``-T`` tasks, ``-O`` trainers).

A plugin declares its options as `OptionSpec`s (type, default, help); `parse_options` turns the
raw strings into typed values, and an unknown key or a value of the wrong type is one error that
names the flag, the key and the plugin, with what it accepts.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, Callable, ClassVar, Mapping, NoReturn, TypeVar

from negharness.contracts.errors import UserError

TRUE = frozenset({"1", "true", "yes", "on"})
FALSE = frozenset({"0", "false", "no", "off"})


def parse_bool(value: str | bool, what: str = "value") -> bool:
    """The one truthy vocabulary: 1/true/yes/on and 0/false/no/off, any case."""
    if isinstance(value, bool):
        return value
    low = str(value).strip().lower()
    if low in TRUE:
        return True
    if low in FALSE:
        return False
    raise UserError(f"{what}: expected true or false (1/0, yes/no, on/off), got {value!r}")


# the on/off environment variables negharness reads, all through `env_flag`
ENV_FLAGS = ("NEGHARNESS_DEBUG", "NEGHARNESS_STRICT_PLUGINS", "NEGHARNESS_ALLOW_LINKS_OUT",
             "NEGHARNESS_SKIP_PICKLE_CALLS")


def env_flag(name: str) -> bool:
    """The one reading of an on/off environment variable: unset or empty is off, else `parse_bool`'s
    vocabulary (so ``NEGHARNESS_DEBUG=0`` is off); anything else is an error naming the variable.
    The CLI checks every `ENV_FLAGS` entry at start (`check_env_flags`), so a later read never fails."""
    raw = os.environ.get(name, "")
    return False if not raw.strip() else parse_bool(raw, f"${name}")


def check_env_flags() -> None:
    for name in ENV_FLAGS:
        env_flag(name)


@dataclass(frozen=True)
class OptionSpec:
    """One option: its type (str, int, float, bool, or a callable that parses a string), default, help."""

    type: Callable[[str], Any] = str
    default: Any = None
    help: str = ""
    choices: tuple[Any, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    changes_numbers: bool = True  # False for speed knobs (a batch size): left out of configs and cache keys
    # True when the value may name a file or folder the numbers rest on (``-T qrels=FILE``): when it
    # does, its content hash enters the record's data hashes (`negharness.engine.reuse.option_files`); a
    # model's such option holds no weights (`weights_named`); a judge's (``-J arch``) may be a hub id too,
    # whose local snapshot commit its records keep (`judge_sources`)
    data_file: bool = False

    def parse(self, raw: str, what: str) -> Any:
        if self.type is bool:
            value: Any = parse_bool(raw, what)
        else:
            try:
                value = self.type(raw)
            except (TypeError, ValueError) as exc:
                name = getattr(self.type, "__name__", "value")
                detail = f" ({exc})" if self.type not in (int, float) else ""
                raise UserError(f"{what}: expected {name}, got {raw!r}{detail}") from None
        if self.choices and value not in self.choices:
            raise UserError(f"{what}: choose one of {', '.join(map(str, self.choices))}")
        if self.minimum is not None and value < self.minimum:
            raise UserError(f"{what}: must be at least {self.minimum:g}")
        if self.maximum is not None and value > self.maximum:
            raise UserError(f"{what}: must be at most {self.maximum:g}")
        return value


def canonical_text(value: Any, raw: str) -> str:
    """One spelling of a parsed option value, for what names a model (records, rows): booleans
    ``true``/``false``, numbers as Python writes them (``-M scale=1e0`` is ``1.0``), strings as
    parsed; a value of another type (a custom parser's object) keeps its raw spelling."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        return str(value)
    return raw


def parse_options(raw: Mapping[str, str], specs: Mapping[str, OptionSpec], flag: str, owner: str,
                  ignore_unknown: bool = False) -> dict[str, Any]:
    """Typed values for every declared option (defaults filled in); unknown keys are an error unless
    ``ignore_unknown`` (a run's ``-T`` keys may belong to another of its tasks; the run checks that
    each key belongs to at least one)."""
    unknown = sorted(set(raw) - set(specs))
    if unknown and not ignore_unknown:
        refuse_unknown(unknown[0], specs, flag, owner)
    out = {k: s.default for k, s in specs.items()}
    for key, value in raw.items():
        if key in specs:
            out[key] = specs[key].parse(value, f"{flag} {key}={value} ({owner})")
    return out


def refuse_unknown(key: str, specs: Mapping[str, OptionSpec], flag: str, owner: str) -> NoReturn:
    """The one refusal of an undeclared ``KEY=VALUE`` (``-M``, ``-T`` and ``-O`` alike): it names the
    flag, the key and the owner, the closest declared name, and everything the owner takes."""
    from difflib import get_close_matches  # lazy: only on a refusal

    found = get_close_matches(key, list(specs), n=1, cutoff=0.6)
    close = f"; did you mean {found[0]}?" if found else ""
    accepted = ", ".join(sorted(specs)) or "none"
    raise UserError(f"{flag} {key}: not an option of {owner}{close} (it takes: {accepted})")


def describe_options(specs: Mapping[str, OptionSpec], flag: str = "", with_help: bool = True) -> str:
    """``-T key=type (default X): help`` lines, for `negharness list` and error messages."""
    lines = []
    for key, s in sorted(specs.items()):
        kind = "|".join(map(str, s.choices)) if s.choices else getattr(s.type, "__name__", "value")
        default = "" if s.default is None else f" (default {s.default})"
        about = f": {s.help}" if s.help and with_help else ""
        lines.append(f"{flag + ' ' if flag else ''}{key}={kind}{default}{about}")
    return "\n".join(lines)


def check_batch_size(value: int, option: str = "--batch-size") -> int:
    """The one batch-size rule, for `run` and `train` alike."""
    if value < 1:
        raise UserError(f"{option} {value}: must be at least 1")
    return value


F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True, eq=False)
class TakesOptions:
    """What `takes_options` returns: the options a plugin factory takes, as a value, and the decorator
    that gives them to a factory. Made in a module that imports no torch and named at registration
    (``registry.add(name, "pkg.model:factory", help, options="pkg.options:DECLARED")``), it lets the
    host refuse an ``-M``, ``-O`` or ``-J`` typo before the plugin's own module (and torch) is imported; the
    factory decorated with the same object (``@DECLARED``) takes exactly those options."""

    options: Mapping[str, OptionSpec]
    passes_rest: bool = False
    wraps: str | Callable[[Any], str | None] | None = None

    def __call__(self, factory: F) -> F:
        if isinstance(factory, type):  # a class stays itself (isinstance, subclasses): the host binds for it
            self._mark(factory)
            return factory

        @functools.wraps(factory)
        def bound_factory(options: Any, *args: Any, **kwargs: Any) -> Any:
            return factory(bind_declared(bound_factory, options, factory.__name__), *args, **kwargs)

        self._mark(bound_factory)
        return bound_factory  # type: ignore[return-value]  # the wrapper takes what the factory takes

    def _mark(self, target: Any) -> None:
        """The declaration on the factory, for the host to read (no type says so)."""
        target.options = self.options
        target.passes_rest = self.passes_rest
        target.wraps = self.wraps


def takes_options(specs: Mapping[str, OptionSpec], passes_rest: bool = False,
                  wraps: str | Callable[[Any], str | None] | None = None) -> TakesOptions:
    """The one statement of the options a plugin factory takes (``-M`` for a model, ``-T`` for a
    training set, ``-O`` for a trainer): the factory receives them bound (`bind_declared`), typed,
    defaults filled in, in read-only ``options.values``, and never parses or restates them. The host
    binds them before it calls the factory (an error names the plugin as registered); a factory
    called directly binds them itself, the same way. `negharness list` shows them without building
    anything. A wrapper that gives every other ``-M`` to the model it wraps says ``passes_rest=True``:
    the keys it does not declare reach it unparsed in ``options.rest`` instead of being refused; with
    ``wraps="base"`` (implies ``passes_rest``) it says which of its options names that model, so the host
    names the rest as that model names its own (``-M base=clip -M quick_gelu=YES`` is ``quick_gelu=true``);
    a wrapper whose base is not an option (a fine-tune whose checkpoint names its base) gives instead a
    function of its options that returns that model's name (or None where it cannot tell).

    The result is a value (`TakesOptions`) as well as a decorator: kept in a module without torch and
    named by the registration (``options="module:attribute"``), the run checks the options before torch
    loads (`as_declaration`)."""
    return TakesOptions(dict(specs), passes_rest or wraps is not None, wraps)


def as_declaration(found: Any, where: str) -> TakesOptions:
    """What a registration's ``options=`` names, as a `TakesOptions`: one already, or a mapping of
    `OptionSpec` (a plain factory's options); anything else is an error naming ``where``."""
    if isinstance(found, TakesOptions):
        return found
    if isinstance(found, Mapping) and all(isinstance(k, str) and isinstance(v, OptionSpec) for k, v in found.items()):
        return takes_options(found)
    raise UserError(f"{where}: must name a takes_options(...) or a dict of OptionSpec, not {type(found).__name__}")


def declaration_drift(declared: TakesOptions, factory: Any) -> str:
    """How the options a factory takes (its `takes_options`) differ from the registration's declaration
    (`as_declaration`): "" when they agree, else a phrase naming the first difference."""
    specs = declared_options(factory)
    if specs is None:
        return "its factory declares no options (decorate it with the declaration options= names)"
    keys = sorted(set(specs) ^ set(declared.options))
    if keys:
        return f"option {keys[0]!r} is declared by only one of them"
    changed = sorted(k for k in specs if specs[k] != declared.options[k])
    if changed:
        return f"option {changed[0]!r} is declared differently"
    for attr in ("passes_rest", "wraps"):
        if getattr(factory, attr, None) != getattr(declared, attr):
            return f"their {attr} differ"
    return ""


def bind_declared(factory: Any, options: Any, name: str) -> Any:
    """What a factory receives: its options object bound to the options it declares (`takes_options`)
    once, by the host, naming the plugin ``name``; options already bound to them pass unchanged, and
    a factory that declares none gets them raw."""
    specs = declared_options(factory)
    if specs is None or not isinstance(options, BindsOptions) or options.bound_to_keys(specs):
        return options
    return options.bind(specs, name, passes_rest=bool(getattr(factory, "passes_rest", False)))


def split_options(raw: Mapping[str, str], specs: Mapping[str, OptionSpec], flag: str, owner: str,
                  passes_rest: bool = False) -> tuple[dict[str, Any], dict[str, str]]:
    """(typed values of the declared options, the undeclared raw rest): the rest is refused, naming
    ``owner``, unless ``passes_rest``."""
    rest = {k: v for k, v in raw.items() if k not in specs} if passes_rest else {}
    values = parse_options({k: v for k, v in raw.items() if k not in rest}, specs, flag, owner)
    return values, rest


def declared_options(target: Any) -> Mapping[str, OptionSpec] | None:
    """The options a registered target declares: a task class's ``task_options``, a factory's
    ``options`` (`takes_options`); None when it declares none."""
    specs = getattr(target, "task_options", None)
    if specs is None:
        specs = getattr(target, "options", None)
    return specs if isinstance(specs, Mapping) else None


class BindsOptions:
    """What a plugin's options object (`ModelOptions`, `TrainSetOptions`, `TrainOptions`) shares:
    raw ``extra`` strings, and once the host has bound them to the factory's declared options, their
    typed, read-only ``values`` (and, for a wrapper, the undeclared ``rest``). A subclass is a
    dataclass with the fields ``extra``, ``values``, ``rest`` and ``bound``, and names its ``FLAG``
    and ``OWNER``; ``AS_FLAGS`` maps a key that is a command-line flag instead to that flag."""

    FLAG = "-M"
    OWNER = "model"
    AS_FLAGS: ClassVar[Mapping[str, str]] = {}
    extra: dict[str, str]
    values: Mapping[str, Any]
    rest: Mapping[str, str]
    bound: bool

    def bind(self, specs: Mapping[str, OptionSpec], name: str, passes_rest: bool = False) -> Any:
        """A copy whose ``values`` are ``extra`` parsed against ``specs`` once (an unknown key or a bad
        value is one error naming the plugin); what the host does before it calls a factory."""
        for key, flag in self.AS_FLAGS.items():
            if key in self.extra and key not in specs:
                raise UserError(f"{self.FLAG} {key}: give {flag}" + (" (the spelling `run` uses)" if flag.startswith("--")
                                                                        else " (an option of the training set)"))
        values, rest = split_options(self.extra, specs, self.FLAG, f"{self.OWNER} {name!r}", passes_rest)
        # the mixin is always a dataclass (ModelOptions, TrainOptions, ...), which mypy cannot see from here
        return replace(self, values=MappingProxyType(values), rest=MappingProxyType(rest),  # type: ignore[type-var]
                       bound=True)

    def bound_to_keys(self, specs: Mapping[str, OptionSpec], at_least: bool = False) -> bool:
        """Whether these options are already bound to ``specs`` (the host bound them before the
        factory's own `takes_options` sees them); with ``at_least``, to ``specs`` and maybe more (a
        builder shared by factories that each declare these options and their own: the one rule of
        both, `OpenClipModel.create`)."""
        if not self.bound:
            return False
        return set(specs) <= set(self.values) if at_least else set(self.values) == set(specs)


def frozen_empty() -> Mapping[str, Any]:
    """The default of an unbound options object's ``values`` and ``rest``."""
    return MappingProxyType({})
