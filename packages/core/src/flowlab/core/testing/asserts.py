"""Assertions for numerical tests: empirical convergence orders, and sample moments with tolerances set by the
sample size."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

__all__ = ["assert_convergence_order", "assert_moments_close", "empirical_order"]


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
