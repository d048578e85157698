"""Assertions for numerical tests: empirical convergence orders, sample moments with tolerances set by the
sample size, and bit-identical tensor files of two runs (a resumed run against an uninterrupted one)."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

__all__ = ["assert_convergence_order", "assert_moments_close", "assert_same_tensors", "empirical_order"]


def empirical_order(
    errors: Sequence[float] | torch.Tensor,
    step_sizes: Sequence[float] | torch.Tensor | None = None,
    *,
    nfe: Sequence[float] | torch.Tensor | None = None,
) -> float:
    """The least-squares slope p of log(error) against log(step size), for errors ~ C h^p.

    Give exactly one of `step_sizes` (h) or `nfe` (function evaluations; h ~ 1/nfe, so the slope is taken
    against -log nfe). Every error must be positive and finite.
    """
    if (step_sizes is None) == (nfe is None):
        raise ValueError("step_sizes, nfe: give exactly one of them")
    err = torch.as_tensor(errors, dtype=torch.float64).flatten()
    h = torch.as_tensor(step_sizes if nfe is None else nfe, dtype=torch.float64).flatten()
    if nfe is not None:
        h = 1 / h
    if err.numel() != h.numel() or err.numel() < 2:
        got = f"{err.numel()} and {h.numel()}"
        raise ValueError(f"errors: expected at least 2 values, one per step size; got {got}")
    if not bool((torch.isfinite(err) & (err > 0)).all()):
        raise ValueError(f"errors: expected positive finite values, got {err.tolist()}")
    if not bool((torch.isfinite(h) & (h > 0)).all()) or torch.unique(h).numel() < 2:
        raise ValueError("step_sizes, nfe: expected positive values with at least two distinct ones")
    lx, ly = torch.log(h), torch.log(err)
    lx = lx - lx.mean()
    return float((lx * (ly - ly.mean())).sum() / (lx**2).sum())


def assert_convergence_order(
    errors: Sequence[float] | torch.Tensor,
    step_sizes: Sequence[float] | torch.Tensor | None = None,
    expected: float | None = None,
    *,
    nfe: Sequence[float] | torch.Tensor | None = None,
    tol: float = 0.25,
) -> float:
    """Assert the empirical order (see `empirical_order`) is within `tol` of `expected`; return the order."""
    if expected is None:
        raise ValueError("expected: the expected convergence order is required")
    order = empirical_order(errors, step_sizes, nfe=nfe)
    if not abs(order - expected) <= tol:
        shown = ", ".join(f"{float(e):.3g}" for e in torch.as_tensor(errors).flatten())
        raise AssertionError(f"convergence order {order:.3f}, expected {expected} +- {tol} (errors: {shown})")
    return order


def assert_moments_close(
    samples: torch.Tensor,
    mean: torch.Tensor,
    cov: torch.Tensor,
    *,
    num_sigma: float = 5.0,
    extra_tol: float = 0.0,
) -> None:
    """Assert the sample mean and covariance of `samples: (N, D)` match `mean: (D,)` and `cov: (D, D)`.

    Each entry may differ by `num_sigma` standard errors estimated from the samples themselves (valid for
    any distribution with finite fourth moments: the s.e. of a covariance entry is the sample standard
    deviation of (x_i - m_i)(x_j - m_j) over sqrt(N)) plus `extra_tol` (e.g. a known discretisation bias).
    """
    if samples.dim() != 2 or mean.shape != samples.shape[1:] or cov.shape != (samples.shape[1],) * 2:
        raise ValueError(
            f"samples, mean, cov: expected (N, D), (D,), (D, D), got {tuple(samples.shape)}, "
            f"{tuple(mean.shape)}, {tuple(cov.shape)}"
        )
    x, mean, cov = samples.double().cpu(), mean.double().cpu(), cov.double().cpu()
    if not bool(torch.isfinite(x).all()):
        raise AssertionError("samples: contain NaN or inf values")
    n = x.shape[0]
    centred = x - x.mean(0)
    products = centred[:, :, None] * centred[:, None, :]
    mean_err = (x.mean(0) - mean).abs()
    mean_tol = num_sigma * x.std(0) / math.sqrt(n) + extra_tol
    cov_err = (products.sum(0) / (n - 1) - cov).abs()
    cov_tol = num_sigma * products.std(0) / math.sqrt(n) + extra_tol
    if bool((mean_err > mean_tol).any()):
        raise AssertionError(f"sample mean off: |error| {mean_err.tolist()} > tolerance {mean_tol.tolist()}")
    if bool((cov_err > cov_tol).any()):
        raise AssertionError(f"sample covariance off: |error| {cov_err.tolist()} > tol {cov_tol.tolist()}")


def _tensors(path: Path) -> Any:
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        return load_file(path)
    from flowlab.core.train.checkpoint import load_weights

    return load_weights(path, map_location="cpu")


def _diff(a: Any, b: Any, where: str) -> list[str]:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        same = isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
        return [] if same and a.dtype == b.dtype and torch.equal(a, b) else [where]
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        if set(a) != set(b):
            return [f"{where} keys {sorted(set(a) ^ set(b), key=str)}"]
        return [d for k in a for d in _diff(a[k], b[k], f"{where}.{k}")]
    if isinstance(a, list | tuple) and isinstance(b, list | tuple) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in _diff(x, y, f"{where}[{i}]")]
    return [] if a == b else [where]


def assert_same_tensors(first: str | os.PathLike[str], second: str | os.PathLike[str], pattern: str) -> None:
    """The tensor files matching `pattern` (a glob, e.g. `"**/*.pt"`) under two run folders are the same files
    holding bit-identical tensors (state_dicts, optimizer and RNG states): a resumed run against an uninterrupted
    one. `.safetensors` files are read with safetensors, the rest with the core's tensor-only loader."""
    first, second = Path(first), Path(second)
    names = sorted(p.relative_to(first) for p in first.glob(pattern))
    other = sorted(p.relative_to(second) for p in second.glob(pattern))
    assert names, f"no file matches {pattern!r} under {first}"
    assert names == other, f"the runs hold different files: {sorted(set(map(str, names)) ^ set(map(str, other)))}"
    differ = [d for name in names for d in _diff(_tensors(first / name), _tensors(second / name), str(name))]
    assert not differ, f"tensors differ between the runs: {differ[:10]}"
