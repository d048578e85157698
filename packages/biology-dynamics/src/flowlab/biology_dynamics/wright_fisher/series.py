"""The spectral (Jacobi-polynomial) series of the Wright-Fisher transition density and its score, for one letter b
with a = psi pi_b (uniform pi: a = psi / letters):

    G_b(x) = sum_k (-1)^k (2k + psi - 1) Gamma(psi + k - 1) / (Gamma(psi) k!) e^(-k (k + psi - 1) tau / 2)
             2F1(-k, psi + k - 1; a; x_b),
    F_b(x) = sum_k (-1)^k (2k + psi + 1) (psi + k) / ((psi + 1) psi) Gamma(psi + k) / (Gamma(psi) k!)
             e^(-k (k + psi + 1) tau / 2) 2F1(-k, psi + k + 1; a + 1; x_b),

G_b = p(x_tau | x_0 = b) / Dirichlet(x_tau; psi pi) (the same ratio `likelihood.log_ratio` sums over lineages)
and, since d/dx 2F1(-k, k + l; c; x) = -k (k + l) / c 2F1(1 - k, k + l + 1; c + 1; x), dG_b / dx_b =
e^(-psi tau / 2) (psi + 1) / pi_b F_b: the score of the ratio along e_b is that over G_b.

2F1(-n, n + l; c; x) = n! / (c)_n P_n^(c - 1, l - c)(1 - 2x) is a Jacobi polynomial, computed by its three-term
recurrence (float64, stable on [0, 1]): 2 (n + l - 1) (2n + l - 3) (n + c - 1) h_n = (2n + l - 2) ((2n + l - 1)
(2n + l - 3) (1 - 2x) + (c - 1)^2 - (l - c)^2) h_(n-1) - 2 (n - 1) (n + l - c - 1) (2n + l - 1) h_(n-2), with
h_0 = 1, h_1 = 1 - (1 + l) x / c. The series converge fast for tau >= 0.1; below, the terms grow before they decay and
the lineage form in `likelihood` is the one to use.
"""

from __future__ import annotations

import math

import torch

__all__ = ["f_series", "g_series", "hyp2f1_terminating", "series_score"]


def hyp2f1_terminating(n_max: int, l: float, c: float, x: torch.Tensor) -> torch.Tensor:
    """2F1(-n, n + l; c; x) for n = 0..n_max: x (...,) in [0, 1] -> (..., n_max + 1) float64."""
    if not (isinstance(n_max, int) and n_max >= 0):
        raise ValueError(f"n_max: expected an int >= 0, got {n_max!r}")
    if not (c > 0 and l > 0):
        raise ValueError(f"l, c: expected positive parameters, got l={l!r}, c={c!r}")
    x = x.to(torch.float64)
    y = 1 - 2 * x
    h = [torch.ones_like(x), 1 - (1 + l) * x / c]
    for n in range(2, n_max + 1):
        s = 2 * n + l
        left = 2 * (n + l - 1) * (s - 3) * (n + c - 1)
        mid = (s - 2) * ((s - 1) * (s - 3) * y + (c - 1) ** 2 - (l - c) ** 2)
        right = 2 * (n - 1) * (n + l - c - 1) * (s - 1)
        h.append((mid * h[-1] - right * h[-2]) / left)
    return torch.stack(h[: n_max + 1], dim=-1)


def _check(x_b: torch.Tensor, tau: torch.Tensor, psi: float) -> None:
    if not isinstance(x_b, torch.Tensor) or not isinstance(tau, torch.Tensor) or x_b.shape != tau.shape:
        raise ValueError("x_b, tau: expected tensors of one shape (a coordinate and its time per entry)")
    if bool((tau <= 0).any()) or not (psi > 1):
        raise ValueError("tau, psi: expected times > 0 and psi > 1")


def _weights(k: torch.Tensor, tau: torch.Tensor, shift: float, psi: float) -> torch.Tensor:
    return torch.exp(-(k * (k + psi + shift) / 2) * tau[..., None])


def g_series(x_b: torch.Tensor, tau: torch.Tensor, psi: float, a: float, *, k_max: int = 80) -> torch.Tensor:
    """G_b: x_b (...,) the coordinate of the starting letter b, tau (...,) -> (...,) float64."""
    _check(x_b, tau, psi)
    k = torch.arange(k_max + 1, dtype=torch.float64)
    log_c = torch.log(2 * k + psi - 1) + torch.lgamma(psi + k - 1) - math.lgamma(psi) - torch.lgamma(k + 1)
    coef = torch.where(k % 2 == 0, 1.0, -1.0) * log_c.exp()
    h = hyp2f1_terminating(k_max, psi - 1, a, x_b)
    return (coef * _weights(k, tau.to(torch.float64), -1, psi) * h).sum(-1)


def f_series(x_b: torch.Tensor, tau: torch.Tensor, psi: float, a: float, *, k_max: int = 80) -> torch.Tensor:
    """F_b: x_b (...,), tau (...,) -> (...,) float64."""
    _check(x_b, tau, psi)
    k = torch.arange(k_max + 1, dtype=torch.float64)
    log_c = torch.log((2 * k + psi + 1) * (psi + k) / ((psi + 1) * psi))
    log_c = log_c + torch.lgamma(psi + k) - math.lgamma(psi) - torch.lgamma(k + 1)
    coef = torch.where(k % 2 == 0, 1.0, -1.0) * log_c.exp()
    h = hyp2f1_terminating(k_max, psi + 1, a + 1, x_b)
    return (coef * _weights(k, tau.to(torch.float64), 1, psi) * h).sum(-1)


def series_score(x_b: torch.Tensor, tau: torch.Tensor, psi: float, a: float, *, k_max: int = 80) -> torch.Tensor:
    """d log G_b / dx_b = e^(-psi tau / 2) (psi + 1) / pi_b F_b / G_b, with pi_b = a / psi: (...,) float64."""
    tau = tau.to(torch.float64)
    g = g_series(x_b, tau, psi, a, k_max=k_max)
    f = f_series(x_b, tau, psi, a, k_max=k_max)
    return torch.exp(-psi * tau / 2) * (psi + 1) * psi / a * f / g
