"""Typed configs: frozen dataclasses whose fields are checked against their annotations when built.

    @dataclass(frozen=True)
    class TrainSettings(Config):
        steps: int = 1000
        lr: float = 1e-3
        hidden: tuple[int, ...] = (256, 256)
        objective: Literal["lsd", "psd"] = "lsd"

    full = TrainSettings(steps=100_000)
    quick = replace(full, steps=5000)          # a misspelt field name is a TypeError
    TrainSettings.from_mapping(tomllib.load(f))  # unknown keys are a ValueError naming them

A wrong type or an unknown key is an error naming the field and what was expected, so a benchmark variant, a CLI
option and a `--config` TOML file all go through the same checks. Supported annotations: bool, int, float (an int
is accepted), str, Path, None, `X | Y`, `Literal[...]`, `tuple[X, ...]`, `tuple[X, Y]`, `Mapping[str, X]` and
nested `Config` subclasses; `Any` is not checked. A subclass adds range checks in its own `__post_init__` and calls
`super().__post_init__()` first.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, Self, get_args, get_origin

__all__ = ["Config"]


@dataclasses.dataclass(frozen=True)
class Config:
    """Base of FlowLab's typed configs (frozen dataclasses with fields checked against their annotations)."""

    def __post_init__(self) -> None:
        hints = _hints(type(self))
        for f in dataclasses.fields(self):
            _check(getattr(self, f.name), hints[f.name], f"{type(self).__name__}.{f.name}")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Self:
        """Build from a mapping (e.g. a parsed TOML table): unknown keys are an error; lists become tuples and
        nested mappings become nested configs."""
        if not isinstance(data, Mapping):
            raise ValueError(f"{cls.__name__}: expected a mapping of field values, got {type(data).__name__}")
        names = {f.name for f in dataclasses.fields(cls) if f.init}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"{cls.__name__}: unknown key(s) {unknown}; expected some of {sorted(names)}")
        hints = _hints(cls)
        return cls(**{k: _coerce(v, hints[k]) for k, v in data.items()})

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: tuples become lists, nested configs dicts and paths strings."""
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _plain(value: Any) -> Any:
    if isinstance(value, Config):
        return value.to_dict()
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Path):
        return str(value)
    return value


def _coerce(value: Any, hint: Any) -> Any:
    """Turn what a TOML/JSON parser yields (lists, tables, strings for paths) into the annotated type's shape."""
    origin, args = get_origin(hint), get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None:
            return None
        for arg in args:
            if arg is not type(None):
                try:
                    coerced = _coerce(value, arg)
                    _check(coerced, arg, "")
                    return coerced
                except (TypeError, ValueError):
                    continue
        return value
    if isinstance(hint, type) and issubclass(hint, Config) and isinstance(value, Mapping):
        return hint.from_mapping(value)
    if hint is Path and isinstance(value, str):
        return Path(value)
    if origin is tuple and isinstance(value, list | tuple):
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_coerce(v, args[0]) for v in value)
        if len(args) == len(value):
            return tuple(_coerce(v, a) for v, a in zip(value, args))
        return tuple(value)
    if origin in (Mapping, dict) and isinstance(value, Mapping):
        return {k: _coerce(v, args[1]) for k, v in value.items()} if args else dict(value)
    return value


def _describe(hint: Any) -> str:
    if isinstance(hint, type):
        return hint.__name__
    return str(hint).replace("typing.", "").replace("collections.abc.", "")


def _check(value: Any, hint: Any, name: str) -> None:
    if not _matches(value, hint):
        raise ValueError(f"{name}: expected {_describe(hint)}, got {value!r} ({type(value).__name__})")


def _matches(value: Any, hint: Any) -> bool:
    if hint is Any:
        return True
    if hint is None or hint is type(None):
        return value is None
    origin, args = get_origin(hint), get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, a) for a in args)
    if origin is Literal:
        return any(value == a and type(value) is type(a) for a in args)
    if origin is tuple:
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_matches(v, args[0]) for v in value)
        return len(value) == len(args) and all(_matches(v, a) for v, a in zip(value, args))
    if origin in (Mapping, dict):
        if not isinstance(value, Mapping):
            return False
        key, item = args if args else (Any, Any)
        return all(_matches(k, key) and _matches(v, item) for k, v in value.items())
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if isinstance(hint, type):
        return isinstance(value, hint)
    raise TypeError(f"unsupported config annotation {hint!r}")
