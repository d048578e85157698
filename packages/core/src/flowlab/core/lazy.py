"""Lazy package namespaces (PEP 562): a package's public names are imported on first use, so that importing one
module of a package (a command group's CLI, `flowlab <group> --help`) loads no torch.

    __getattr__, __dir__, __all__ = lazy_exports(__name__, {"flowlab.core.train.ema": ["EMA"]}, submodules=["ema"])

`lazy_loader` (scientific-python) does this for names of the package's own submodules; a FlowLab package also
re-exports names from its siblings (`value_flows` re-exports `flowlab.rl_control.data.OfflineDataset`), so the
modules here are absolute.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


class _LazyNamespace(types.ModuleType):
    """A package whose exported `name` comes from its own submodule `name` (`metrics.mmd` from `metrics/mmd.py`):
    importing that submodule binds the module over the name (as Python does for every submodule), which an eager
    `from .mmd import mmd` would have re-bound; here the binding is skipped, so the name stays the function."""

    _flowlab_shadowed: frozenset[str] = frozenset()

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._flowlab_shadowed and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


def lazy_exports(
    package: str, exports: Mapping[str, Iterable[str]], submodules: Iterable[str] = ()
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """The `__getattr__`, `__dir__` and `__all__` of `package`: each name in `exports[module]` is
    `getattr(import_module(module), name)` on first access (then cached in the package), each name in `submodules`
    the package's submodule of that name."""
    submodules = tuple(submodules)
    origin: dict[str, str] = {}
    for module, names in exports.items():
        for name in names:
            if name in origin or name in submodules:
                raise ValueError(f"{package}: {name!r} is exported twice")
            origin[name] = module
    public = sorted([*submodules, *origin])
    module = sys.modules[package]
    shadowed = frozenset(name for name, source in origin.items() if source == f"{package}.{name}")
    if shadowed:
        module.__class__ = _LazyNamespace
        module._flowlab_shadowed = shadowed

    def __getattr__(name: str) -> Any:
        if name in submodules:
            return importlib.import_module(f"{package}.{name}")
        if name not in origin:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(origin[name]), name)
        setattr(module, name, value)
        return value

    def __dir__() -> list[str]:
        return list(public)

    return __getattr__, __dir__, list(public)
