"""Lazy package namespaces: every exported name resolves, importing a package loads none of its modules, errors."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
import types

import pytest

import flowlab
from flowlab.core.lazy import lazy_exports


def _lazy_packages() -> list[str]:
    """Every FlowLab package whose namespace is lazy (its `__getattr__` comes from `lazy_exports`)."""
    found = []
    for info in pkgutil.walk_packages(flowlab.__path__, "flowlab.", onerror=lambda name: None):
        if not info.ispkg or info.name.endswith((".benchmarks", ".testing")):
            continue
        module = importlib.import_module(info.name)
        getter = getattr(module, "__getattr__", None)
        if getter is not None and getter.__qualname__.startswith("lazy_exports"):
            found.append(info.name)
    return found


def test_every_lazy_name_resolves_to_its_module_object():
    packages = _lazy_packages()
    assert {"flowlab.core", "flowlab.core.train", "flowlab.rl_control.value_flows"} <= set(packages)
    for name in packages:
        module = importlib.import_module(name)
        assert module.__all__ == sorted(module.__all__) and module.__dir__() == module.__all__
        for attr in module.__all__:
            value = getattr(module, attr)
            assert value is not None, f"{name}.{attr}"
            if isinstance(value, types.ModuleType):
                assert value.__name__ == f"{name}.{attr}"


def test_importing_a_package_loads_none_of_its_exports():
    code = "import sys, flowlab.core, flowlab.core.train; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_name_is_cached_after_first_use_and_unknown_names_fail():
    from flowlab.core import train

    ema = train.EMA
    assert train.__dict__["EMA"] is ema
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        _ = train.Nope
    with pytest.raises(ValueError, match="exported twice"):
        lazy_exports("x", {"a": ["f"], "b": ["f"]})


def test_a_function_named_like_its_submodule_stays_the_function():
    """`flowlab.core.metrics.mmd` is the function even after its module `metrics/mmd.py` was imported directly."""
    code = (
        "import flowlab.core.metrics.wasserstein, flowlab.core.metrics.mmd, flowlab.core.gfm.sample\n"
        "from flowlab.core.metrics import mmd, wasserstein\n"
        "from flowlab.core import gfm, metrics\n"
        "print(callable(mmd), callable(wasserstein), callable(metrics.mmd), callable(gfm.sample))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True"] * 4, out.stderr
