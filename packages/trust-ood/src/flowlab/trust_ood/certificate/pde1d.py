"""1-D periodic PDE data for the certificate study: the heat equation (exact in Fourier space) and viscous Burgers
(pseudo-spectral, 2/3 dealiasing, integrating-factor RK4), with in-distribution and OOD families of initial data.

Domain [0, 1) with N equispaced points x_j = j / N. A sample is (u0: (N,), param: scalar, u(T): (N,)), where param is
the diffusivity kappa (heat) or the viscosity nu (Burgers): the task parameter the regressor receives. Families:

- "id":        u0 = sum_{k=1..4} a_k sin(2 pi k x + phi_k), a_k ~ U[-1, 1] / k, param from the training range;
- "high_freq": the same with k in 8..12 (a_k ~ U[-1, 1] / (k - 7)), param in range;
- "bumps":     1-3 periodic Gaussian bumps (amplitude U[-1, 1], width U[0.03, 0.08]), param in range;
- "param_shift": u0 exactly as "id" (p(u0) unchanged) but param from a larger range: the task is harder.

Everything is numpy, float64, driven by a numpy Generator so a data set is reproducible from its seed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from flowlab.trust_ood.certificate.names import FAMILIES, PDES

__all__ = [
    "FAMILIES",
    "PDES",
    "PDEConfig",
    "PDEData",
    "burgers_solve",
    "generate",
    "heat_solve",
    "initial_conditions",
]


@dataclass(frozen=True)
class PDEConfig:
    """The problem: `pde`, grid size `n`, final time `t_final`, the in-distribution parameter range `param_range`
    and the shifted one `ood_param_range`; Burgers solves on a grid `fine_factor` times finer, then subsamples."""

    pde: str = "heat"
    n: int = 64
    t_final: float = 0.02
    param_range: tuple[float, float] = (0.5, 1.0)
    ood_param_range: tuple[float, float] = (2.0, 4.0)
    fine_factor: int = 4

    def __post_init__(self) -> None:
        if self.pde not in PDES:
            raise ValueError(f"pde: expected one of {PDES}, got {self.pde!r}")
        if not isinstance(self.n, int) or self.n < 32 or self.n % 2:
            raise ValueError(f"n: expected an even grid size >= 32 (the OOD family reaches k=12), got {self.n!r}")
        if not self.t_final > 0:
            raise ValueError(f"t_final: expected a positive final time, got {self.t_final!r}")
        for name, (lo, hi) in (("param_range", self.param_range), ("ood_param_range", self.ood_param_range)):
            if not 0 < lo <= hi:
                raise ValueError(f"{name}: expected 0 < low <= high, got ({lo}, {hi})")
        if not isinstance(self.fine_factor, int) or self.fine_factor < 1:
            raise ValueError(f"fine_factor: expected a positive int, got {self.fine_factor!r}")

    @staticmethod
    def default(pde: str, n: int = 64) -> PDEConfig:
        """The study's settings: heat T=0.02, kappa in [0.5, 1] (OOD [2, 4]); Burgers T=0.05, nu in [0.01, 0.02]
        (OOD [0.04, 0.08])."""
        if pde == "heat":
            return PDEConfig("heat", n, 0.02, (0.5, 1.0), (2.0, 4.0))
        if pde == "burgers":
            return PDEConfig("burgers", n, 0.05, (0.01, 0.02), (0.04, 0.08))
        raise ValueError(f"pde: expected one of {PDES}, got {pde!r}")


@dataclass(frozen=True)
class PDEData:
    """u0: (B, N) initial data, param: (B,) diffusivity/viscosity, u_final: (B, N) the solution at t_final."""

    u0: np.ndarray
    param: np.ndarray
    u_final: np.ndarray
    family: str


def _grid(n: int) -> np.ndarray:
    return np.arange(n) / n


def initial_conditions(family: str, count: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """(count, n) initial data of `family` on the grid j / n (see the module docstring)."""
    if family not in FAMILIES:
        raise ValueError(f"family: expected one of {FAMILIES}, got {family!r}")
    x = _grid(n)
    if family == "bumps":
        u = np.zeros((count, n))
        nbumps = rng.integers(1, 4, size=count)
        for j in range(3):
            amp = rng.uniform(-1, 1, size=count) * (j < nbumps)
            centre = rng.uniform(0, 1, size=count)
            width = rng.uniform(0.03, 0.08, size=count)
            d = (x[None, :] - centre[:, None] + 0.5) % 1.0 - 0.5  # periodic distance
            u += amp[:, None] * np.exp(-0.5 * (d / width[:, None]) ** 2)
        return u
    ks = np.arange(8, 13) if family == "high_freq" else np.arange(1, 5)
    scale = ks - ks[0] + 1
    a = rng.uniform(-1, 1, size=(count, len(ks))) / scale
    phi = rng.uniform(0, 2 * math.pi, size=(count, len(ks)))
    return np.einsum("bk,bkn->bn", a, np.sin(2 * math.pi * ks[None, :, None] * x[None, None, :] + phi[..., None]))


def _check_field(u: np.ndarray, name: str, n: int | None = None) -> np.ndarray:
    u = np.asarray(u, dtype=np.float64)
    if u.ndim != 2:
        raise ValueError(f"{name}: expected shape (B, N), got {u.shape}")
    if n is not None and u.shape[1] != n:
        raise ValueError(f"{name}: expected grid size {n}, got {u.shape[1]}")
    if not np.isfinite(u).all():
        raise ValueError(f"{name}: contains NaN or inf values")
    return u


def _check_param(param, batch: int, name: str) -> np.ndarray:
    p = np.broadcast_to(np.asarray(param, dtype=np.float64), (batch,))
    if not (np.isfinite(p).all() and (p > 0).all()):
        raise ValueError(f"{name}: expected positive finite values, got range [{p.min()}, {p.max()}]")
    return p


def heat_solve(u0: np.ndarray, kappa, t_final: float) -> np.ndarray:
    """u_t = kappa u_xx on [0, 1) periodic, exactly: u_hat_k(T) = u_hat_k(0) exp(-kappa (2 pi k)^2 T).

    u0: (B, N); kappa: scalar or (B,) -> (B, N)."""
    u0 = _check_field(u0, "u0")
    kappa = _check_param(kappa, u0.shape[0], "kappa")
    k = np.fft.rfftfreq(u0.shape[1], d=1.0 / u0.shape[1])
    decay = np.exp(-kappa[:, None] * (2 * math.pi * k[None, :]) ** 2 * t_final)
    return np.fft.irfft(np.fft.rfft(u0, axis=1) * decay, n=u0.shape[1], axis=1)


def burgers_solve(u0: np.ndarray, nu, t_final: float, *, cfl: float = 0.4) -> np.ndarray:
    """u_t + (u^2 / 2)_x = nu u_xx on [0, 1) periodic: Fourier pseudo-spectral with 2/3-rule dealiasing and
    integrating-factor RK4 (diffusion exact, advection explicit; dt from the CFL number over the whole batch).

    u0: (B, N); nu: scalar or (B,) -> (B, N). The spatial mean (the mass) is conserved exactly."""
    u0 = _check_field(u0, "u0")
    nu = _check_param(nu, u0.shape[0], "nu")
    n = u0.shape[1]
    k = 2 * math.pi * np.fft.rfftfreq(n, d=1.0 / n)
    dealias = np.fft.rfftfreq(n, d=1.0 / n) <= n / 3
    umax = max(float(np.abs(u0).max()), 1e-3)
    steps = max(1, math.ceil(t_final / (cfl / (n * umax))))
    dt = t_final / steps
    lin = -nu[:, None] * k[None, :] ** 2  # (B, K)
    e_half, e_full = np.exp(0.5 * dt * lin), np.exp(dt * lin)

    def nonlinear(v_hat: np.ndarray) -> np.ndarray:
        u = np.fft.irfft(v_hat, n=n, axis=1)
        return -0.5j * k * np.fft.rfft(u * u, axis=1) * dealias

    v = np.fft.rfft(u0, axis=1)
    for _ in range(steps):
        a = dt * nonlinear(v)
        b = dt * nonlinear(e_half * (v + 0.5 * a))
        c = dt * nonlinear(e_half * v + 0.5 * b)
        d = dt * nonlinear(e_full * v + e_half * c)
        v = e_full * v + (e_full * a + 2 * e_half * (b + c) + d) / 6
    return np.fft.irfft(v, n=n, axis=1)


def generate(config: PDEConfig, family: str, count: int, *, seed: int) -> PDEData:
    """`count` samples of `family` for `config`, reproducible from `seed` (numpy PCG64)."""
    if family not in FAMILIES:
        raise ValueError(f"family: expected one of {FAMILIES}, got {family!r}")
    if not isinstance(count, int) or count < 1:
        raise ValueError(f"count: expected a positive int, got {count!r}")
    rng = np.random.default_rng(seed)
    lo, hi = config.ood_param_range if family == "param_shift" else config.param_range
    param = rng.uniform(lo, hi, size=count)
    if config.pde == "heat":
        u0 = initial_conditions(family, count, config.n, rng)
        u_final = heat_solve(u0, param, config.t_final)
    else:
        fine = config.n * config.fine_factor
        u0_fine = initial_conditions(family, count, fine, rng)
        u_final = burgers_solve(u0_fine, param, config.t_final)[:, :: config.fine_factor]
        u0 = u0_fine[:, :: config.fine_factor]
    return PDEData(u0=u0, param=param, u_final=u_final, family=family)
