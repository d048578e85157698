"""A branching bistable gene switch with known growth: the ground-truth generator for WFR-FM.

Two genes repress each other and activate themselves (a toggle switch):
    dx_i = (a x_iⁿ / (sⁿ + x_iⁿ) + b sⁿ / (sⁿ + x_jⁿ) − k x_i) dt + noise dW_i    (a = b = 1, s = 1, n = 4, k = 1)
The spec's n = 2, s = 0.5 makes the symmetric state (1, 1) stable (Jacobian eigenvalues −0.36, −1), so cells
would never branch; with n = 4, s = 1 it is a saddle (eigenvalue +1 along x_1 − x_2) between two fates near
(1.94, 0.07) and (0.07, 1.94).
Cells divide at rate λ(x) = 0.3 + 0.6 · sigmoid(4 (x_1 − x_2)) (the x_1-high branch grows faster) and die at rate
μ = 0.1, simulated by τ-leaping with dt = 0.01; the true growth rate is g(x) = λ(x) − μ. At each observation time a
fraction of the living cells is sampled (destructive measurement is not modelled: sampling does not remove cells).
All parameters are FlowLab's and are recorded in `uns["generator"]`.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import anndata as ad
import numpy as np
import pandas as pd
import torch

__all__ = ["ToggleSwitchParams", "branching_toggle_switch", "toggle_switch_growth"]


@dataclass(frozen=True)
class ToggleSwitchParams:
    """The generator's parameters: the drift's a, b, s, Hill exponent n (`hill`) and decay k, the noise scale, the
    birth rate λ(x) = birth_base + birth_amp · sigmoid(birth_slope (x_1 − x_2)), the death rate μ, the τ-leaping step
    dt, the fraction of living cells sampled at each time, and the founders' normal start (init_mean, init_std)."""

    a: float = 1.0
    b: float = 1.0
    s: float = 1.0
    hill: float = 4.0
    k: float = 1.0
    noise: float = 0.1
    birth_base: float = 0.3
    birth_amp: float = 0.6
    birth_slope: float = 4.0
    death: float = 0.1
    dt: float = 0.01
    sample_fraction: float = 0.5
    init_mean: tuple[float, float] = (1.0, 1.0)
    init_std: float = 0.1


def _drift(x: torch.Tensor, p: ToggleSwitchParams) -> torch.Tensor:
    sn = p.s**p.hill
    xn = x.pow(p.hill)
    return p.a * xn / (sn + xn) + p.b * sn / (sn + xn.flip(1)) - p.k * x


def _birth(x: torch.Tensor, p: ToggleSwitchParams) -> torch.Tensor:
    return p.birth_base + p.birth_amp * torch.sigmoid(p.birth_slope * (x[:, 0] - x[:, 1]))


def toggle_switch_growth(X: np.ndarray | torch.Tensor, params: ToggleSwitchParams | None = None) -> np.ndarray:
    """The true net growth rate g(x) = λ(x) − μ at the points X: (n, 2) -> (n,)."""
    p = params or ToggleSwitchParams()
    x = torch.as_tensor(np.asarray(X, dtype=np.float64))
    if x.dim() != 2 or x.shape[1] != 2:
        raise ValueError(f"X: expected an (n, 2) array of gene levels, got shape {tuple(x.shape)}")
    return (_birth(x, p) - p.death).numpy()


def branching_toggle_switch(
    n0: int = 400,
    times: Sequence[float] = (0.0, 1.0, 2.0, 3.0, 4.0),
    *,
    generator: torch.Generator | None = None,
    params: ToggleSwitchParams | None = None,
) -> ad.AnnData:
    """Simulate n0 founder cells near the switch's saddle and sample them at `times` (increasing, starting >= 0).

    Returns an AnnData with X = obsm["X_emb"] (n, 2) gene levels, obs["time"], obs["true_growth"] (λ − μ at the
    cell) and obs["n_alive"] (living cells at that time, before sampling); uns["generator"] holds the parameters.
    """
    p = params or ToggleSwitchParams()
    if isinstance(n0, bool) or not isinstance(n0, int) or n0 < 2:
        raise ValueError(f"n0: expected an integer >= 2 founder cells, got {n0!r}")
    times = [float(t) for t in times]
    if len(times) < 2 or any(b <= a for a, b in itertools.pairwise(times)) or times[0] < 0:
        raise ValueError(f"times: expected >= 2 increasing non-negative times, got {times}")
    gen = generator if generator is not None else torch.Generator().manual_seed(0)

    def rand(*shape: int) -> torch.Tensor:
        return torch.rand(shape, generator=gen, dtype=torch.float64)

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(shape, generator=gen, dtype=torch.float64)

    x = torch.tensor(p.init_mean, dtype=torch.float64) + p.init_std * randn(n0, 2)
    x = x.clamp_min(0)
    t, blocks = 0.0, []
    for t_obs in times:
        while t < t_obs - 1e-9:
            h = min(p.dt, t_obs - t)
            x = (x + _drift(x, p) * h + p.noise * np.sqrt(h) * randn(*x.shape)).clamp_min(0)
            born = rand(x.shape[0]) < _birth(x, p) * h
            dead = rand(x.shape[0]) < p.death * h
            x = torch.cat([x[~dead], x[born & ~dead]])
            t += h
        if x.shape[0] == 0:
            raise RuntimeError("branching_toggle_switch: the population died out; use more founder cells")
        keep = rand(x.shape[0]) < p.sample_fraction
        blocks.append((t_obs, x[keep].clone(), x.shape[0]))
    X = torch.cat([b[1] for b in blocks]).numpy().astype(np.float32)
    obs = pd.DataFrame(
        {
            "time": np.concatenate([np.full(b[1].shape[0], b[0]) for b in blocks]),
            "n_alive": np.concatenate([np.full(b[1].shape[0], b[2]) for b in blocks]),
        },
        index=[f"cell{i}" for i in range(X.shape[0])],
    )
    obs["true_growth"] = toggle_switch_growth(X, p)
    adata = ad.AnnData(X=X, obs=obs, var=pd.DataFrame(index=["gene1", "gene2"]))
    adata.obsm["X_emb"] = X.copy()
    adata.uns["generator"] = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(p).items()}
    adata.uns["generator"].update(n0=n0, times=times)
    return adata
