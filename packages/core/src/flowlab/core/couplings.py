"""Couplings between a source batch x_0 and a data batch x_1: independent, exact, entropic and unbalanced OT.

Every OT solve goes through POT on the CPU in float64 (numpy), except the unbalanced coupling's
`solver="sinkhorn"`, which solves on the inputs' device (`flowlab.core.unbalanced_sinkhorn`); the pairing is moved
back to the inputs' device. Costs are `"sqeuclidean"` (on flattened events), a callable
`cost(x_0, x_1) -> (B0, B1)`, or a `Manifold`, whose cost is the squared geodesic distance `manifold.dist(x, y)**2`.

Exact OT between two batches of the same size with uniform weights has a permutation as its optimal plan
(Birkhoff), so `ExactOTCoupling` returns `x_1[perm]` with no point duplicated or dropped. Sampling pairs from
a plan draws *with replacement*; the couplings that do so say it in their names (`SampledOTCoupling`,
`SinkhornCoupling`) and in their results (`index_0`, `index_1`).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from flowlab.core.manifolds.base import Manifold
from flowlab.core.unbalanced_sinkhorn import unbalanced_sinkhorn_kl
from flowlab.core.validation import check_choice, check_positive, check_same_batch, check_tensor

__all__ = [
    "Cost",
    "CoupledBatch",
    "Coupling",
    "ExactOTCoupling",
    "IndependentCoupling",
    "PairSample",
    "Plan",
    "SampledOTCoupling",
    "SinkhornCoupling",
    "UnbalancedOTCoupling",
    "cost_matrix",
    "mm_unbalanced_kl",
]

Cost = str | Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | Manifold

#: bound on the number of ambient coordinates materialised at once by the pairwise manifold distance
_PAIRWISE_BLOCK = 1 << 22


def _pot():
    """POT, imported on first use: it imports scikit-learn, about 4 s of every process that imports this module."""
    import ot

    return ot


@dataclass(frozen=True)
class CoupledBatch:
    """Paired batches: x_0[k] is coupled with x_1[k].

    x_0: (N, ...) = input_x_0[index_0]; x_1: (N, ...) = input_x_1[index_1]; index_0, index_1: (N,) long.
    cost: the transport cost <G, C> of the solved plan with the unnormalised cost C (None for the independent
    coupling, which solves nothing).
    """

    x_0: torch.Tensor
    x_1: torch.Tensor
    index_0: torch.Tensor
    index_1: torch.Tensor
    cost: float | None


@dataclass(frozen=True)
class PairSample:
    """Pairs (i, j) drawn from a plan, with the masses the two semi-couplings carry on them; each (n,)."""

    i: torch.Tensor
    j: torch.Tensor
    m_0: torch.Tensor
    m_1: torch.Tensor


@dataclass(frozen=True)
class Plan:
    """A transport plan G: (n0, n1) (float64) between source masses a: (n0,) and target masses b: (n1,).

    For balanced plans G 1 = a and G^T 1 = b; unbalanced plans match them only approximately.
    """

    G: torch.Tensor
    a: torch.Tensor
    b: torch.Tensor

    def semi_couplings(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(gamma_0, gamma_1) = (diag(a / G 1) G, G diag(b / G^T 1)), so gamma_0 1 = a, gamma_1^T 1 = b.

        Raises ValueError if a row or column of G carries no mass (for unbalanced plans: reg_m too small).
        """
        rows, cols = self.G.sum(1), self.G.sum(0)
        if bool((rows <= 0).any()) or bool((cols <= 0).any()):
            empty = int((rows <= 0).sum()) + int((cols <= 0).sum())
            raise ValueError(
                f"G: {empty} rows/columns of the plan carry no mass, so the semi-couplings are undefined "
                "(for an unbalanced plan, increase reg_m or normalise the cost)"
            )
        return self.G * (self.a / rows)[:, None], self.G * (self.b / cols)[None, :]

    def sample_pairs(self, n: int, *, generator: torch.Generator | None = None) -> PairSample:
        """Draw n pairs (i, j) with probability proportional to gamma_0[i, j] (with replacement).

        m_0 = gamma_0[i, j] / gamma_0.sum() * sum(a) and m_1 = gamma_1[i, j] / gamma_1.sum() * sum(b).
        """
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"n: expected a positive number of pairs, got {n!r}")
        gamma_0, gamma_1 = self.semi_couplings()
        flat = _sample_categorical(gamma_0.reshape(-1), n, generator)
        n1 = self.G.shape[1]
        i, j = flat // n1, flat % n1
        m_0 = gamma_0[i, j] / gamma_0.sum() * self.a.sum()
        m_1 = gamma_1[i, j] / gamma_1.sum() * self.b.sum()
        return PairSample(i=i, j=j, m_0=m_0, m_1=m_1)


def cost_matrix(x_0: torch.Tensor, x_1: torch.Tensor, cost: Cost = "sqeuclidean") -> torch.Tensor:
    """Pairwise cost C[i, j] = c(x_0[i], x_1[j]): x_0: (B0, ...), x_1: (B1, ...) -> (B0, B1).

    Computed on the inputs' device and dtype (differentiable). `"sqeuclidean"` flattens the event dimensions;
    a `Manifold` gives squared geodesic distances (points are checked to lie on it); a callable is called as
    `cost(x_0, x_1)` and must return a finite (B0, B1) tensor.
    """
    _check_pair_inputs(x_0, x_1)
    return _cost(x_0, x_1, cost)


def _cost(x_0: torch.Tensor, x_1: torch.Tensor, cost: Cost) -> torch.Tensor:
    """`cost_matrix` for inputs already checked by `_check_pair_inputs`."""
    if isinstance(cost, Manifold):
        cost.check_point(x_0, "x_0")
        cost.check_point(x_1, "x_1")
        return _pairwise_manifold_sq_dist(cost, x_0, x_1)
    if callable(cost):
        c = cost(x_0, x_1)
        c = torch.as_tensor(c, device=x_0.device)
        if c.shape != (x_0.shape[0], x_1.shape[0]):
            raise ValueError(
                f"cost: expected the callable to return shape ({x_0.shape[0]}, {x_1.shape[0]}), got {tuple(c.shape)}"
            )
        return check_tensor(c, "cost")
    check_choice(cost, ("sqeuclidean",), "cost")
    a, b = x_0.flatten(1), x_1.flatten(1)
    # ||a||^2 + ||b||^2 - 2 a.b in one matrix product (as fast as POT's own `ot.dist`)
    return torch.addmm(a.square().sum(1, keepdim=True), a, b.T, alpha=-2).add_(b.square().sum(1)).clamp_min_(0)


def _pairwise_manifold_sq_dist(manifold: Manifold, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """d_g(x_i, y_j)^2 for all pairs, in row blocks that bound memory: (B0, n), (B1, n) -> (B0, B1)."""
    n0, n1 = x.shape[0], y.shape[0]
    rows = max(1, _PAIRWISE_BLOCK // max(1, n1 * x.shape[1]))
    blocks = []
    for start in range(0, n0, rows):
        xb = x[start : start + rows]
        d = manifold.dist(xb.repeat_interleave(n1, 0), y.repeat(xb.shape[0], 1))
        blocks.append(d.reshape(xb.shape[0], n1).square())
    return torch.cat(blocks)


def _sample_categorical(p: torch.Tensor, n: int, generator: torch.Generator | None) -> torch.Tensor:
    """n indices drawn with probabilities proportional to p: (K,) >= 0, by inverse CDF (any K)."""
    cdf = torch.cumsum(p.to(torch.float64), 0)
    device = generator.device if generator is not None else p.device
    u = torch.rand(n, generator=generator, device=device, dtype=torch.float64).to(p.device) * cdf[-1]
    return torch.searchsorted(cdf, u, right=True).clamp_max_(p.numel() - 1)


def _cost_numpy(x_0: torch.Tensor, x_1: torch.Tensor, cost: Cost) -> np.ndarray:
    """The cost matrix as a CPU float64 numpy array (one device transfer, no gradient), computed in float64: the
    network simplex pivots on exact comparisons, so float32 rounding of the costs would change the plan. CPU inputs
    with the squared Euclidean cost use POT's own `ot.dist`, so the plan is the one a direct POT call finds."""
    x_0, x_1 = x_0.detach().to(torch.float64), x_1.detach().to(torch.float64)
    if isinstance(cost, str) and x_0.device.type == "cpu":
        return _pot().dist(x_0.flatten(1).numpy(), x_1.flatten(1).numpy())
    with torch.no_grad():
        c = _cost(x_0, x_1, cost)
    return c.to("cpu").numpy()


def _check_cost(cost: Cost) -> Cost:
    if isinstance(cost, str):
        check_choice(cost, ("sqeuclidean",), "cost")
    elif not (isinstance(cost, Manifold) or callable(cost)):
        raise ValueError(f"cost: expected 'sqeuclidean', a callable or a Manifold, got {type(cost).__name__}")
    return cost


def _check_pair_inputs(x_0: torch.Tensor, x_1: torch.Tensor) -> None:
    check_tensor(x_0, "x_0")
    check_tensor(x_1, "x_1")
    if x_0.shape[1:] != x_1.shape[1:]:
        raise ValueError(f"x_0, x_1: event shapes differ, {tuple(x_0.shape[1:])} vs {tuple(x_1.shape[1:])}")


def _normalised(M: np.ndarray | torch.Tensor) -> np.ndarray | torch.Tensor:
    top = M.max()
    return M / top if top > 0 else M


def _as_plan(G: np.ndarray, a: np.ndarray, b: np.ndarray, device: torch.device) -> Plan:
    def to(v: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(v, dtype=np.float64)).to(device)

    return Plan(G=to(G), a=to(a), b=to(b))


def _pairs_from_plan(
    G: np.ndarray, M: np.ndarray, x_0: torch.Tensor, x_1: torch.Tensor, n: int | None, generator
) -> CoupledBatch:
    n = x_0.shape[0] if n is None else n
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n: expected a positive number of pairs, got {n!r}")
    flat = _sample_categorical(torch.from_numpy(G).reshape(-1), n, generator)
    n1 = G.shape[1]
    i, j = (flat // n1).to(x_0.device), (flat % n1).to(x_0.device)
    return CoupledBatch(x_0=x_0[i], x_1=x_1[j], index_0=i, index_1=j, cost=float(np.vdot(G, M)))


class Coupling(ABC):
    """A rule pairing a source batch with a data batch: `pair(x_0, x_1, *, generator=None) -> CoupledBatch`.

    Every coupling shares this signature so that swapping one for another is one word; deterministic couplings
    ignore `generator`.
    """

    @abstractmethod
    def pair(self, x_0: torch.Tensor, x_1: torch.Tensor, *, generator: torch.Generator | None = None) -> CoupledBatch:
        """x_0: (B0, ...), x_1: (B1, ...) -> CoupledBatch"""


class IndependentCoupling(Coupling):
    """The batches as they come: x_0[k] with x_1[k] (both batches must have the same size)."""

    def pair(self, x_0: torch.Tensor, x_1: torch.Tensor, *, generator: torch.Generator | None = None) -> CoupledBatch:
        """x_0, x_1: (B, ...) -> CoupledBatch with index_0 = index_1 = arange(B); `generator` is unused."""
        _check_pair_inputs(x_0, x_1)
        batch = check_same_batch(x_0=x_0, x_1=x_1)
        index = torch.arange(batch, device=x_0.device)
        return CoupledBatch(x_0=x_0, x_1=x_1, index_0=index, index_1=index, cost=None)

    def __repr__(self) -> str:
        return "IndependentCoupling()"


class _WithCost:
    def __init__(self, cost: Cost) -> None:
        self.cost = _check_cost(cost)

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({fields})"


class _OTCoupling(_WithCost, Coupling):
    """An OT coupling: a cost and `pair`."""


class ExactOTCoupling(_OTCoupling):
    """Mini-batch exact OT (`ot.emd`, uniform weights) between batches of equal size: a permutation of x_1.

    `pair` returns x_0 unchanged and x_1[perm] (index_1 = perm), with no point duplicated or dropped. For
    batches of different sizes use `SampledOTCoupling`, which samples pairs from the plan with replacement.
    """

    def __init__(self, cost: Cost = "sqeuclidean", *, num_iter_max: int = 1_000_000) -> None:
        super().__init__(cost)
        self.num_iter_max = int(num_iter_max)

    def plan(self, x_0: torch.Tensor, x_1: torch.Tensor) -> Plan:
        """The exact OT plan between uniform weights: G: (B0, B1) on x_0's device (float64)."""
        _check_pair_inputs(x_0, x_1)
        M = _cost_numpy(x_0, x_1, self.cost)
        a, b = np.full(M.shape[0], 1.0 / M.shape[0]), np.full(M.shape[1], 1.0 / M.shape[1])
        return _as_plan(_pot().emd(a, b, M, numItermax=self.num_iter_max), a, b, x_0.device)

    def pair(self, x_0: torch.Tensor, x_1: torch.Tensor, *, generator: torch.Generator | None = None) -> CoupledBatch:
        """x_0, x_1: (B, ...) -> CoupledBatch(x_0, x_1[perm], arange(B), perm, cost); ignores `generator`."""
        _check_pair_inputs(x_0, x_1)
        if x_0.shape[0] != x_1.shape[0]:
            raise ValueError(
                f"x_1: exact OT pairs batches of equal size (got x_0={x_0.shape[0]}, x_1={x_1.shape[0]}); "
                "use SampledOTCoupling to sample pairs from the plan with replacement"
            )
        M = _cost_numpy(x_0, x_1, self.cost)
        G = _pot().emd(np.empty(0), np.empty(0), M, numItermax=self.num_iter_max)  # empty weights = uniform
        perm = G.argmax(1)
        if np.bincount(perm, minlength=len(perm)).max() != 1:
            raise RuntimeError(
                "ExactOTCoupling: ot.emd did not return a permutation (did it stop at num_iter_max?); "
                f"raise num_iter_max (now {self.num_iter_max})"
            )
        cost = float(M[np.arange(len(perm)), perm].mean())
        perm_t = torch.from_numpy(perm).to(x_1.device)
        index_0 = torch.arange(len(perm), device=x_0.device)
        return CoupledBatch(x_0=x_0, x_1=x_1[perm_t], index_0=index_0, index_1=perm_t, cost=cost)


class SampledOTCoupling(_OTCoupling):
    """Exact OT plan (`ot.emd`, uniform weights) between batches of any sizes, then n pairs sampled from the
    plan *with replacement* (points may repeat or be left out; use `ExactOTCoupling` for a permutation)."""

    def __init__(self, cost: Cost = "sqeuclidean", *, num_iter_max: int = 1_000_000) -> None:
        super().__init__(cost)
        self.num_iter_max = int(num_iter_max)

    def pair(
        self,
        x_0: torch.Tensor,
        x_1: torch.Tensor,
        *,
        n: int | None = None,
        generator: torch.Generator | None = None,
    ) -> CoupledBatch:
        """x_0: (B0, ...), x_1: (B1, ...) -> n pairs (default B0) drawn from the plan."""
        _check_pair_inputs(x_0, x_1)
        M = _cost_numpy(x_0, x_1, self.cost)
        a, b = np.full(M.shape[0], 1.0 / M.shape[0]), np.full(M.shape[1], 1.0 / M.shape[1])
        G = _pot().emd(a, b, M, numItermax=self.num_iter_max)
        return _pairs_from_plan(G, M, x_0, x_1, n, generator)


class SinkhornCoupling(_OTCoupling):
    """Entropic OT (`ot.sinkhorn`, uniform weights), then n pairs sampled from the plan with replacement.

    reg: entropic regularisation, relative to the cost's maximum when `normalize_cost=True` (the cost is divided
    by its maximum before solving). `method`: POT's solver, "sinkhorn" or, for small reg, "sinkhorn_log".
    """

    def __init__(
        self,
        reg: float,
        *,
        normalize_cost: bool = True,
        cost: Cost = "sqeuclidean",
        method: str = "sinkhorn",
        num_iter_max: int = 1000,
    ) -> None:
        super().__init__(cost)
        self.reg = check_positive(reg, "reg")
        self.normalize_cost = bool(normalize_cost)
        self.method = check_choice(method, ("sinkhorn", "sinkhorn_log", "sinkhorn_stabilized"), "method")
        self.num_iter_max = int(num_iter_max)

    def _solve(self, M: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        a, b = np.full(M.shape[0], 1.0 / M.shape[0]), np.full(M.shape[1], 1.0 / M.shape[1])
        M_solve = _normalised(M) if self.normalize_cost else M
        G = _pot().sinkhorn(a, b, M_solve, self.reg, method=self.method, numItermax=self.num_iter_max)
        return G, a, b

    def plan(self, x_0: torch.Tensor, x_1: torch.Tensor) -> Plan:
        """The entropic plan: G: (B0, B1) on x_0's device (float64)."""
        _check_pair_inputs(x_0, x_1)
        G, a, b = self._solve(_cost_numpy(x_0, x_1, self.cost))
        return _as_plan(G, a, b, x_0.device)

    def pair(
        self,
        x_0: torch.Tensor,
        x_1: torch.Tensor,
        *,
        n: int | None = None,
        generator: torch.Generator | None = None,
    ) -> CoupledBatch:
        """x_0: (B0, ...), x_1: (B1, ...) -> n pairs (default B0) drawn from the entropic plan."""
        _check_pair_inputs(x_0, x_1)
        M = _cost_numpy(x_0, x_1, self.cost)
        G, _, _ = self._solve(M)
        return _pairs_from_plan(G, M, x_0, x_1, n, generator)


def mm_unbalanced_kl(
    a: np.ndarray, b: np.ndarray, M: np.ndarray, reg_m: float | tuple[float, float], *, num_iter_max: int = 1000
) -> np.ndarray:
    """KL-penalised unbalanced OT without entropy by majorisation-minimisation: the iterates of
    `ot.unbalanced.mm_unbalanced(a, b, M, reg_m, div="kl", numItermax=num_iter_max)`, computed in place in torch.

    a: (n,), b: (m,) masses, M: (n, m) cost -> G: (n, m), float64. From G = a bᵀ, each step is
    G <- K ⊙ G / ((G 1)^p1 (Gᵀ 1)^p2ᵀ) with K = a^p1 bᵀ^p2 exp(−M / (λ1 + λ2)), p_i = λ_i / (λ1 + λ2). POT also
    allocates a copy and measures the step's change on every iteration (about ten passes over the matrix); this
    makes five: 0.59 s against 2.19 s for 300 steps of a 900 × 969 plan (WFR cost, Gaussian points, one thread).
    Two differences from POT, both invisible unless the plan's marginals come near 1e-16 (masses of 1e-12 per
    point, say): POT adds 1e-16 to the denominator, and it stops once a step changes G by less than 1e-15 in norm,
    while this always runs `num_iter_max` steps. For unit or 1/n masses the plans agree to about 1e-13 relative
    after 1000 steps.
    """
    pair = np.atleast_1d(np.asarray(reg_m, dtype=np.float64))
    if pair.shape not in ((1,), (2,)):
        raise ValueError(f"reg_m: expected a number or a pair of numbers, got {reg_m!r}")
    lam1, lam2 = float(pair[0]), float(pair[-1])
    p1, p2 = lam1 / (lam1 + lam2), lam2 / (lam1 + lam2)
    a_t, b_t = torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64)
    K = torch.as_tensor(M, dtype=torch.float64).div(-(lam1 + lam2)).exp_()
    K.mul_(a_t[:, None].pow(p1)).mul_(b_t[None, :].pow(p2))
    G = a_t[:, None] * b_t[None, :]
    tiny = torch.finfo(torch.float64).tiny  # an empty row or column stays empty instead of becoming 0 · inf
    for _ in range(num_iter_max):
        rows = G.sum(1).clamp_min_(tiny).pow_(-p1)
        cols = G.sum(0).clamp_min_(tiny).pow_(-p2)
        G.mul_(K).mul_(rows[:, None]).mul_(cols[None, :])
    return G.numpy()


class UnbalancedOTCoupling(_WithCost):
    """Unbalanced OT with KL marginal penalties of strength reg_m (a number or a (source, target) pair).

    reg = 0: the unregularised plan, by `solver`:
    - "mm": majorisation-minimisation (`mm_unbalanced_kl`, POT's `mm_unbalanced` iterates), `num_iter_max` dense
      steps. After T steps it is an entropic plan at ε = (ρ1 + ρ2) / T, so on costs much below 1 it stays far from
      the optimum.
    - "sinkhorn": `unbalanced_sinkhorn_kl`, translation-invariant Sinkhorn with ε-scaling down to `eps` on a
      truncated kernel, on the inputs' device, run to its tolerance. On thousands of points per side it is several
      times faster and closer to the optimum (WFR-FM RESULTS.md, "Plan solve at scale").
    reg > 0: entropic (`ot.unbalanced.sinkhorn_unbalanced`, `num_iter_max` steps). Solved in float64.
    Masses: `a`, `b` are the mass of each source / target point (e.g. 1.0 for unnormalised unit masses, which keep
    growth); None means 1/n (probabilities). Per-point masses can also be given to `plan`. `normalize_cost=True`
    divides the cost by its maximum (the solvers stall on costs far from O(1)); pass False when the cost's scale is
    part of the model (e.g. WFR). `chunk`: solve independent blocks of at most `chunk` source and target points
    (rows and columns shuffled with the generator), a block-diagonal plan that trades optimality for time.
    """

    def __init__(
        self,
        reg_m: float | Sequence[float],
        *,
        reg: float = 0.0,
        a: float | None = None,
        b: float | None = None,
        cost: Cost = "sqeuclidean",
        normalize_cost: bool = True,
        chunk: int | None = None,
        num_iter_max: int = 1000,
        solver: str = "mm",
        eps: float = 3e-4,
    ) -> None:
        super().__init__(cost)
        pair = tuple(reg_m) if isinstance(reg_m, Sequence) else (reg_m,)
        if len(pair) not in (1, 2):
            raise ValueError(f"reg_m: expected a number or a pair of numbers, got {reg_m!r}")
        for value in pair:
            check_positive(value, "reg_m")
        self.reg_m = float(pair[0]) if len(pair) == 1 else (float(pair[0]), float(pair[1]))
        if not (isinstance(reg, int | float) and math.isfinite(reg) and reg >= 0):
            raise ValueError(f"reg: expected a non-negative finite number, got {reg!r}")
        self.reg = float(reg)
        self.a = None if a is None else check_positive(a, "a")
        self.b = None if b is None else check_positive(b, "b")
        self.normalize_cost = bool(normalize_cost)
        if chunk is not None and (not isinstance(chunk, int) or chunk < 1):
            raise ValueError(f"chunk: expected a positive block size or None, got {chunk!r}")
        self.chunk = chunk
        self.num_iter_max = int(num_iter_max)
        self.solver = check_choice(solver, ("mm", "sinkhorn"), "solver")
        if solver == "sinkhorn" and self.reg > 0:
            raise ValueError(
                "solver: 'sinkhorn' is for the unregularised plan (reg = 0); reg > 0 is POT's entropic one"
            )
        self.eps = check_positive(eps, "eps")

    def _masses(self, given: torch.Tensor | None, per_point: float | None, n: int, name: str) -> np.ndarray:
        if given is None:
            return np.full(n, 1.0 / n if per_point is None else per_point)
        check_tensor(given, name)
        if given.shape != (n,):
            raise ValueError(f"{name}: expected shape ({n},) (one mass per point), got {tuple(given.shape)}")
        if bool((given <= 0).any()):
            raise ValueError(f"{name}: masses must be positive")
        return given.detach().to("cpu", torch.float64).numpy()

    def _solve(self, a: np.ndarray, b: np.ndarray, M: np.ndarray) -> np.ndarray:
        if self.solver == "sinkhorn":
            return self._sinkhorn(torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(M)).numpy()
        if self.normalize_cost:
            M = _normalised(M)
        if self.reg == 0:
            return mm_unbalanced_kl(a, b, M, self.reg_m, num_iter_max=self.num_iter_max)
        return _pot().unbalanced.sinkhorn_unbalanced(a, b, M, self.reg, self.reg_m, numItermax=self.num_iter_max)

    def _sinkhorn(self, a: torch.Tensor, b: torch.Tensor, M: torch.Tensor) -> torch.Tensor:
        if self.normalize_cost:
            M = _normalised(M)
        return unbalanced_sinkhorn_kl(a, b, M, self.reg_m, eps=self.eps).plan

    def plan(
        self,
        x_0: torch.Tensor,
        x_1: torch.Tensor,
        *,
        a: torch.Tensor | None = None,
        b: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> Plan:
        """x_0: (n0, ...), x_1: (n1, ...), optional masses a: (n0,), b: (n1,) -> Plan (float64, x_0's device).

        `generator` shuffles the blocks when `chunk` is set and is unused otherwise.
        """
        _check_pair_inputs(x_0, x_1)
        n0, n1 = x_0.shape[0], x_1.shape[0]
        a_np = self._masses(a, self.a, n0, "a")
        b_np = self._masses(b, self.b, n1, "b")
        if self.solver == "sinkhorn" and (self.chunk is None or max(n0, n1) <= self.chunk):
            with torch.no_grad():
                M = _cost(x_0.detach().to(torch.float64), x_1.detach().to(torch.float64), self.cost)
            a_t, b_t = (torch.from_numpy(v).to(M.device) for v in (a_np, b_np))
            return Plan(G=self._sinkhorn(a_t, b_t, M), a=a_t, b=b_t)
        if self.chunk is None or max(n0, n1) <= self.chunk:
            G = self._solve(a_np, b_np, _cost_numpy(x_0, x_1, self.cost))
            return _as_plan(G, a_np, b_np, x_0.device)
        blocks = math.ceil(max(n0, n1) / self.chunk)
        if blocks > min(n0, n1):
            raise ValueError(f"chunk: {blocks} blocks need at least that many points on each side, got {n0}, {n1}")
        on = generator.device if generator is not None else "cpu"
        rows = torch.randperm(n0, generator=generator, device=on).cpu().tensor_split(blocks)
        cols = torch.randperm(n1, generator=generator, device=on).cpu().tensor_split(blocks)
        G = np.zeros((n0, n1))
        for r, c in zip(rows, cols):
            r_np, c_np = r.numpy(), c.numpy()
            M = _cost_numpy(x_0[r.to(x_0.device)], x_1[c.to(x_1.device)], self.cost)
            G[np.ix_(r_np, c_np)] = self._solve(a_np[r_np], b_np[c_np], M)
        return _as_plan(G, a_np, b_np, x_0.device)
