"""Reading a YAML task file with limits: a task file may come from anywhere, so it is parsed as
safe YAML (no Python tags) of at most `MAX_YAML_BYTES`, UTF-8, with no anchors or aliases (how a
762-byte file expands to gigabytes), no duplicate keys (one would silently drop the other) and at most
`MAX_YAML_DEPTH` levels of nesting. Every refusal names the file, and the line where there is one.
`Checker` is the typed access to its keys that `negharness.declarative.spec.parse_spec` checks them
through: every complaint names the file and the dotted key."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, overload

import yaml

from negharness.contracts.errors import UserError
from negharness.declarative.annotations import short
from negharness.io.json_files import read_capped

MAX_YAML_BYTES = 1 << 20  # a task file is a page of keys; the cap keeps a runaway file from being parsed
MAX_YAML_DEPTH = 32  # nesting levels of mappings and lists (a task file uses four)


class Checker:
    """Typed access to one YAML mapping; every complaint names the file and the dotted key."""

    def __init__(self, source: str, data: dict[str, Any], prefix: str = "") -> None:
        self.source, self.data, self.prefix = source, data, prefix

    def fail(self, key: str, message: str) -> UserError:
        return UserError(f"{self.source}: key {short(self.prefix + str(key))}: {message}")

    def get(self, key: str, kind: type | tuple[type, ...], required: bool = True, default: Any = None) -> Any:
        if key not in self.data or self.data[key] is None:
            if required:
                raise self.fail(key, "missing")
            return default
        value = self.data[key]
        if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
            raise self.fail(key, f"expected {_kind_name(kind)}, got a boolean")
        if not isinstance(value, kind):
            raise self.fail(key, f"expected {_kind_name(kind)}, got {type(value).__name__} {short(value)}")
        return value

    @overload
    def strings(self, key: str, required: Literal[True] = True) -> list[str]: ...

    @overload
    def strings(self, key: str, required: bool) -> list[str] | None: ...

    def strings(self, key: str, required: bool = True) -> list[str] | None:
        value = self.get(key, (str, list), required)
        if value is None:
            return None
        value = [value] if isinstance(value, str) else value
        if not value or not all(isinstance(v, str) and v for v in value):
            raise self.fail(key, "expected a non-empty string or list of non-empty strings")
        return value

    @overload
    def sub(self, key: str, required: Literal[True] = True, allowed: set[str] | None = None) -> "Checker": ...

    @overload
    def sub(self, key: str, required: bool, allowed: set[str] | None = None) -> "Checker | None": ...

    def sub(self, key: str, required: bool = True, allowed: set[str] | None = None) -> "Checker | None":
        value = self.get(key, dict, required)
        if value is None:
            return None
        if allowed is not None:
            unknown = sorted(map(str, set(value) - allowed))
            if unknown:
                raise self.fail(f"{key}.{unknown[0]}", f"unknown key (known: {', '.join(sorted(allowed))})")
        return Checker(self.source, value, f"{self.prefix}{key}.")

    def choices_by_name(self, key: str, options: tuple[str, ...]) -> dict[str, str]:
        """An optional mapping of names (text) to one of ``options`` each (``data.cells: {caption_0:
        text}``); empty when the key is absent. A name that is not text, or a value not among
        ``options``, is refused naming ``key.name``."""
        value: dict[Any, Any] = self.get(key, dict, False, {})
        for name, chosen in value.items():
            if not isinstance(name, str) or not name:
                raise self.fail(f"{key}.{name}", "expected a field name (text)")
            if isinstance(chosen, bool) or chosen not in options:
                raise self.fail(f"{key}.{name}", f"{short(chosen)} is not one of {', '.join(options)}")
        return dict(value)

    def choice(self, key: str, options: tuple[str, ...], default: str | None = None) -> str:
        value: str = self.get(key, str, default is None, default)
        if value not in options:
            raise self.fail(key, f"{short(value)} is not one of {', '.join(options)}")
        return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {str: "a string", int: "an integer", list: "a list", dict: "a mapping", float: "a number", bool: "true/false"}
    return " or ".join(names.get(k, k.__name__) for k in kinds)


class TaskLoader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML has no types here: its classes are Any
    """`yaml.SafeLoader` (no Python tags) that also refuses anchors and aliases, duplicate keys and deep
    nesting. A task file needs none of them; an alias is how a 762-byte file expands to gigabytes
    (nine lists of nine aliases, nine levels deep), and a duplicate key silently drops its first value."""

    depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            what = "alias *" if isinstance(event, yaml.AliasEvent) else "anchor &"
            raise yaml.composer.ComposerError(None, None, f"{what}{short(event.anchor)[1:-1]}: anchors and "
                                              "aliases are not allowed in task files", event.start_mark)
        self.depth += 1
        try:
            if self.depth > MAX_YAML_DEPTH:
                raise yaml.composer.ComposerError(None, None, f"nested more than {MAX_YAML_DEPTH} levels deep",
                                                  event.start_mark)
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, (str, int, float, bool)) or key is None:
                if key in seen:
                    raise yaml.constructor.ConstructorError(None, None, f"duplicate key {short(key)}",
                                                            key_node.start_mark)
                seen.add(key)
        return super().construct_mapping(node, deep)


def read_yaml(path: Path) -> dict[str, Any]:
    """A task file parsed with `TaskLoader`: at most `MAX_YAML_BYTES`, UTF-8, no Python tags,
    anchors, aliases or duplicate keys; every refusal names the file (and line, where there is one)."""
    raw = read_capped(path, MAX_YAML_BYTES, "task file", "a YAML task file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise UserError(f"{path}:{line}: not UTF-8 text ({exc.reason})") from None
    try:
        data = yaml.load(text, Loader=TaskLoader)  # a SafeLoader: no Python tags
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UserError(f"{path}{where}: not a safe YAML task file ({problem})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping of keys (name, kind, ...), found {type(data).__name__}")
    return data
