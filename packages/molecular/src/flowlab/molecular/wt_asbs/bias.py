"""Well-tempered metadynamics bias V(s) on a grid over K <= 2 collective variables.

Hills G(s) = h exp(-|s - s_i|^2 / (2 sigma^2)) (minimum-image distance along periodic CVs) are added to a grid of
V and to grids of dV/ds (analytic hill derivatives); V and dV/ds anywhere come from multilinear interpolation.
Periodic axes hold `bins` nodes spanning [lo, hi) and wrap; bounded axes hold `bins` nodes on [lo, hi] and clamp
(with zero gradient outside). `walls` add harmonic walls 0.5 k (s - end)^2 beyond an interval of each bounded axis
(PLUMED's LOWER_WALLS / UPPER_WALLS); put them well inside the grid, so that the hills deposited against a wall are
on the grid (a clamped grid end with no room beyond it collects bias that pushes the CV out). Well-tempered heights:
h_i = height exp(-V(s_i) / (k_B DeltaT)), DeltaT = T (gamma - 1), so V -> -(1 - 1/gamma) F + const and
F(s) = -gamma / (gamma - 1) V(s).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from flowlab.core.config import Config

__all__ = ["BiasConfig", "BiasValue", "WellTemperedBias"]


@dataclass(frozen=True)
class BiasValue:
    """value: (B,) bias energy; grad: (B, K) dV/ds."""

    value: torch.Tensor
    grad: torch.Tensor


def _per_axis(value, k: int, name: str) -> tuple:
    out = tuple(value) if isinstance(value, Sequence) and not isinstance(value, str) else (value,) * k
    if len(out) != k:
        raise ValueError(f"{name}: expected {k} entries (one per CV), got {value!r}")
    return out


class WellTemperedBias:
    """V(s) on a (bins,)*K grid. kT: k_B T in energy units; bias_factor: gamma > 1; height, sigma per hill.

    grid_min, grid_max, bins, periodic, sigma: one value or one per CV; walls: ((lower, upper), ...) one interval
    per CV (periodic CVs take none: None in their place) with force constant `wall_k` (energy per CV unit squared),
    or None. The walls are part of V (and so of any e^{V/kT} reweighting) but not of the grid or of `free_energy`.
    """

    def __init__(
        self,
        grid_min: float | Sequence[float],
        grid_max: float | Sequence[float],
        bins: int | Sequence[int],
        *,
        sigma: float | Sequence[float],
        height: float,
        bias_factor: float,
        kT: float,
        periodic: bool | Sequence[bool] = False,
        walls: Sequence[Sequence[float] | None] | None = None,
        wall_k: float = 1e5,
        dtype: torch.dtype = torch.float64,
        device: torch.device | str | None = None,
    ) -> None:
        k = len(grid_min) if isinstance(grid_min, Sequence) else 1
        if k not in (1, 2):
            raise ValueError(f"grid_min: expected 1 or 2 collective variables, got {k}")
        self.k = k
        self.lo = torch.tensor(_per_axis(grid_min, k, "grid_min"), dtype=dtype, device=device)
        self.hi = torch.tensor(_per_axis(grid_max, k, "grid_max"), dtype=dtype, device=device)
        if not bool((self.hi > self.lo).all()):
            raise ValueError(f"grid_max: expected > grid_min, got {grid_min!r}, {grid_max!r}")
        self.bins = tuple(int(b) for b in _per_axis(bins, k, "bins"))
        if any(b < 3 for b in self.bins):
            raise ValueError(f"bins: expected at least 3 nodes per CV, got {bins!r}")
        self.periodic = tuple(bool(p) for p in _per_axis(periodic, k, "periodic"))
        self.sigma = torch.tensor(_per_axis(sigma, k, "sigma"), dtype=dtype, device=device)
        if not bool((self.sigma > 0).all()):
            raise ValueError(f"sigma: expected positive hill widths, got {sigma!r}")
        for name, v in (("height", height), ("kT", kT)):
            if not (isinstance(v, int | float) and math.isfinite(v) and v > 0):
                raise ValueError(f"{name}: expected a positive number, got {v!r}")
        if not (isinstance(bias_factor, int | float) and bias_factor > 1):
            raise ValueError(f"bias_factor: expected gamma > 1, got {bias_factor!r}")
        self.height, self.kT, self.bias_factor = float(height), float(kT), float(bias_factor)
        self.walls = None if walls is None else self._check_walls(walls, wall_k)
        self.wall_k = float(wall_k)
        self.spacing = torch.stack(
            [(self.hi[a] - self.lo[a]) / (self.bins[a] if self.periodic[a] else self.bins[a] - 1) for a in range(k)]
        )
        self.values = torch.zeros(self.bins, dtype=dtype, device=device)
        self.grads = torch.zeros((k, *self.bins), dtype=dtype, device=device)
        self.n_hills = 0

    def _check_walls(self, walls, wall_k: float) -> tuple[torch.Tensor, torch.Tensor]:
        """(lower (K,), upper (K,)) of the walls, +-inf on periodic axes; a ValueError names a bad spec."""
        if not (isinstance(wall_k, int | float) and math.isfinite(wall_k) and wall_k > 0):
            raise ValueError(f"wall_k: expected a positive force constant, got {wall_k!r}")
        if len(walls) != self.k:
            raise ValueError(f"walls: expected {self.k} intervals (one per CV), got {walls!r}")
        lo, hi = [], []
        for a, w in enumerate(walls):
            if self.periodic[a] or w is None:
                if not self.periodic[a] or w is not None:
                    raise ValueError(f"walls: expected an interval for each bounded CV and None for periodic ones, "
                                     f"got {walls!r}")  # fmt: skip
                lo.append(-math.inf)
                hi.append(math.inf)
                continue
            w_lo, w_hi = (float(v) for v in w)
            if not (self.lo[a] <= w_lo < w_hi <= self.hi[a]):
                raise ValueError(f"walls: expected lower < upper inside the grid [{float(self.lo[a])}, "
                                 f"{float(self.hi[a])}], got {tuple(w)}")  # fmt: skip
            lo.append(w_lo)
            hi.append(w_hi)
        return self.lo.new_tensor(lo), self.lo.new_tensor(hi)

    @property
    def nodes(self) -> list[torch.Tensor]:
        """The grid coordinates along each CV: [(bins_a,)]."""
        return [
            self.lo[a] + self.spacing[a] * torch.arange(self.bins[a], device=self.lo.device, dtype=self.lo.dtype)
            for a in range(self.k)
        ]

    def _delta(self, s: torch.Tensor, a: int, nodes: torch.Tensor) -> torch.Tensor:
        d = s[:, a, None] - nodes[None, :]
        if self.periodic[a]:
            width = self.hi[a] - self.lo[a]
            d = d - width * torch.round(d / width)
        return d

    def _check_s(self, s: torch.Tensor) -> torch.Tensor:
        if not isinstance(s, torch.Tensor) or s.dim() != 2 or s.shape[1] != self.k:
            shape = tuple(s.shape) if isinstance(s, torch.Tensor) else type(s).__name__
            raise ValueError(f"s: expected shape (B, {self.k}), got {shape}")
        if not bool(torch.isfinite(s).all()):
            raise ValueError("s: contains NaN or inf")
        return s.to(self.values)

    def add_hills(self, s: torch.Tensor, *, weights: torch.Tensor | None = None) -> torch.Tensor:
        """Deposit one hill per row of s: (B, K) with the well-tempered height (from V before this batch).

        weights: optional (B,) extra factors. Returns the heights used, (B,).
        """
        s = self._check_s(s)
        heights = self.height * torch.exp(-self(s).value / (self.kT * (self.bias_factor - 1)))
        if weights is not None:
            heights = heights * weights.to(heights)
        nodes = self.nodes
        # node minus centre (minimum image): dG/ds at a node is -(node - s) / sigma^2 G per axis
        deltas = [-self._delta(s, a, nodes[a]) for a in range(self.k)]  # (B, bins_a)
        gauss = [torch.exp(-0.5 * (d / self.sigma[a]) ** 2) for a, d in enumerate(deltas)]
        if self.k == 1:
            self.values += (heights[:, None] * gauss[0]).sum(0)
            self.grads[0] += (heights[:, None] * gauss[0] * (-deltas[0] / self.sigma[0] ** 2)).sum(0)
        else:
            hg0 = heights[:, None] * gauss[0]
            self.values += torch.einsum("bi,bj->ij", hg0, gauss[1])
            self.grads[0] += torch.einsum("bi,bj->ij", hg0 * (-deltas[0] / self.sigma[0] ** 2), gauss[1])
            self.grads[1] += torch.einsum("bi,bj->ij", hg0, gauss[1] * (-deltas[1] / self.sigma[1] ** 2))
        self.n_hills += s.shape[0]
        return heights

    def _corners(self, s: torch.Tensor) -> tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor]]:
        """Per axis: lower/upper node indices and the fractional position; `inside` masks for bounded axes."""
        lows, highs, fracs = [], [], []
        self._inside = torch.ones(s.shape[0], self.k, dtype=torch.bool, device=s.device)
        for a in range(self.k):
            u = (s[:, a] - self.lo[a]) / self.spacing[a]
            if self.periodic[a]:
                u = torch.remainder(u, self.bins[a])
                i0 = torch.floor(u).long() % self.bins[a]
                i1 = (i0 + 1) % self.bins[a]
            else:
                self._inside[:, a] = (u >= 0) & (u <= self.bins[a] - 1)
                u = u.clamp(0, self.bins[a] - 1)
                i0 = torch.floor(u).long().clamp(max=self.bins[a] - 2)
                i1 = i0 + 1
            lows.append(i0)
            highs.append(i1)
            fracs.append(u - i0.to(u))
        return lows, highs, fracs

    def _interp(self, grid: torch.Tensor, lows, highs, fracs) -> torch.Tensor:
        if self.k == 1:
            return (1 - fracs[0]) * grid[lows[0]] + fracs[0] * grid[highs[0]]
        f0, f1 = fracs
        return (
            (1 - f0) * (1 - f1) * grid[lows[0], lows[1]]
            + f0 * (1 - f1) * grid[highs[0], lows[1]]
            + (1 - f0) * f1 * grid[lows[0], highs[1]]
            + f0 * f1 * grid[highs[0], highs[1]]
        )

    def __call__(self, s: torch.Tensor) -> BiasValue:
        """s: (B, K) -> BiasValue(V (B,), dV/ds (B, K)) by multilinear interpolation of the grids."""
        s = self._check_s(s)
        corners = self._corners(s)
        value = self._interp(self.values, *corners)
        grad = torch.stack([self._interp(self.grads[a], *corners) for a in range(self.k)], dim=-1)
        grad = grad * self._inside.to(grad)
        if self.walls is not None:
            lo, hi = self.walls
            beyond = s - s.clamp(lo, hi)
            value = value + 0.5 * self.wall_k * (beyond**2).sum(-1)
            grad = grad + self.wall_k * beyond
        return BiasValue(value=value, grad=grad)

    def free_energy(self, s: torch.Tensor | None = None) -> torch.Tensor:
        """F = -gamma / (gamma - 1) V, shifted to min 0, on the grid nodes: (bins,)*K, or at points s: (B, K) -> (B,)
        (interpolated V)."""
        v = self.values if s is None else self(s).value
        f = -self.bias_factor / (self.bias_factor - 1) * v
        return f - f.min()

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Tensors only: the V and dV/ds grids and the hill count."""
        return {"values": self.values.clone(), "grads": self.grads.clone(), "n_hills": torch.tensor(self.n_hills)}

    def load_state_dict(self, state: Mapping[str, torch.Tensor]) -> None:
        """Restore `state_dict()`'s grids and hill count; a grid of another shape is a ValueError naming `state`."""
        if tuple(state["values"].shape) != tuple(self.values.shape):
            raise ValueError(f"state: grid shape {tuple(state['values'].shape)} != {tuple(self.values.shape)}")
        self.values = state["values"].to(self.values)
        self.grads = state["grads"].to(self.grads)
        self.n_hills = int(state["n_hills"])


@dataclass(frozen=True)
class BiasConfig(Config):
    """A well-tempered bias's settings apart from its CV range: `bins` grid nodes per CV, hills of width `sigma` (CV
    units) and initial `height` (energy units), bias factor gamma = `bias_factor`, and `walls`: harmonic walls
    (force constant `wall_k`, energy per CV unit squared) beyond one (lower, upper) interval per CV, or None."""

    bins: int
    sigma: float
    height: float
    bias_factor: float
    walls: tuple[tuple[float, float], ...] | None = None
    wall_k: float = 1e5

    def build(
        self,
        grid_min: float | Sequence[float],
        grid_max: float | Sequence[float],
        *,
        kT: float,
        periodic: bool | Sequence[bool] = False,
    ) -> WellTemperedBias:
        """An empty `WellTemperedBias` with these settings on [grid_min, grid_max] (one value or one per CV)."""
        return WellTemperedBias(
            grid_min, grid_max, self.bins, sigma=self.sigma, height=self.height, bias_factor=self.bias_factor, kT=kT,
            periodic=periodic, walls=self.walls, wall_k=self.wall_k,
        )  # fmt: skip
