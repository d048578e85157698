"""Training targets and the weighted velocity/growth regression (CUFM) shared by WFR-FM, OT-CFM and UOT-CFM.

A sampler maps (step, generator) to one batch over all intervals of the time course: a dict of x: (B, d),
t: (B,) normalised times, u: (B, d) target velocities, g: (B,) target growth rates and w: (B,) mass weights.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from flowlab.biology_dynamics.wfr_fm.data import TimeSeries
from flowlab.biology_dynamics.wfr_fm.path import WFRDiracPath, wfr_cost
from flowlab.core.couplings import ExactOTCoupling, Plan, UnbalancedOTCoupling
from flowlab.core.distributions import rand, randint, randn
from flowlab.core.losses import flow_matching_loss
from flowlab.core.train import EMA, FitResult, fit

__all__ = [
    "ExactOTSampler",
    "UnbalancedPlans",
    "WFRSampler",
    "matching_loss",
    "train_matching",
    "unbalanced_plans",
]


@dataclass(frozen=True)
class UnbalancedPlans:
    """The unbalanced plans between consecutive time points (unit masses, WFR cost): plans[k] couples
    times[k] -> times[k + 1]; static_cost[k] = mm_unbalanced2's total cost (transport + KL penalties);
    marginal_error[k] = max relative deviation of (gamma_0 1, gamma_1^T 1) from (a, b); seconds: solve time."""

    plans: tuple[Plan, ...]
    static_cost: tuple[float, ...]
    marginal_error: tuple[float, ...]
    delta: float
    seconds: float


def _gen_kl(p: torch.Tensor, q: torch.Tensor) -> float:
    p = p.clamp_min(1e-300)
    return float((p * (p / q).log() - p + q).sum())


def unbalanced_plans(
    series: TimeSeries,
    *,
    delta: float,
    reg_m: float = 1.0,
    chunk: int | None = None,
    num_iter_max: int = 1000,
    solver: str = "mm",
    eps: float = 3e-4,
    device: torch.device | str = "cpu",
    generator: torch.Generator | None = None,
) -> UnbalancedPlans:
    """Solve `ot.unbalanced.mm_unbalanced(1, 1, c_WFR, reg_m=[reg_m, reg_m])` for each interval: with `solver`
    "mm", the same majorisation-minimisation iterates (float64, `num_iter_max` steps; the reference uses POT's
    default 1000) through the core's in-place `mm_unbalanced_kl`; with "sinkhorn", the core's
    `unbalanced_sinkhorn_kl` down to ε = `eps`, on `device`."""
    coupling = UnbalancedOTCoupling(
        (reg_m, reg_m),
        a=1.0,
        b=1.0,
        cost=wfr_cost(delta),
        normalize_cost=False,
        chunk=chunk,
        num_iter_max=num_iter_max,
        solver=solver,
        eps=eps,
    )
    cost = wfr_cost(delta)
    plans, statics, errors = [], [], []
    start = time.perf_counter()
    for x0, x1 in zip(series.X[:-1], series.X[1:]):
        x0d, x1d = x0.to(device, torch.float64), x1.to(device, torch.float64)
        plan = coupling.plan(x0d, x1d, generator=generator)
        G = plan.G
        transport = float(torch.dot(G.flatten(), cost(x0d, x1d).flatten()))  # no (n0, n1) temporary beyond the cost
        statics.append(transport + reg_m * (_gen_kl(G.sum(1), plan.a) + _gen_kl(G.sum(0), plan.b)))
        g0, g1 = plan.semi_couplings()
        errors.append(float(max((g0.sum(1) - plan.a).abs().max() / plan.a.max(), (g1.sum(0) - plan.b).abs().max())))
        plans.append(plan)
    return UnbalancedPlans(tuple(plans), tuple(statics), tuple(errors), float(delta), time.perf_counter() - start)


def _interval_times(series: TimeSeries) -> tuple[list[float], list[float]]:
    """Normalised start times and durations of the intervals."""
    t = np.asarray(series.times)
    tau = (t - t[0]) / (t[-1] - t[0])
    return tau[:-1].tolist(), np.diff(tau).tolist()


class _PairDraw:
    """Pairs (i, j) ~ gamma_0 with their semi-coupling masses, the CDF built once (Plan.sample_pairs rebuilds the
    semi-couplings and the CDF on every call, which dominated the step time): same law as Plan.sample_pairs.

    Only the plan's nonzero entries are kept (a Sinkhorn plan is mostly exact zeros: a few per cent of 20,000^2
    entries instead of 3 x 3.2 GB). For a dense plan the draws are the same as over every entry: a zero adds
    nothing to the CDF, and `searchsorted(right=True)` never lands on an entry that adds nothing."""

    def __init__(self, plan: Plan, device: torch.device | str) -> None:
        gamma_0, gamma_1 = plan.semi_couplings()
        self.n1 = gamma_0.shape[1]
        flat, positive = gamma_0.reshape(-1), gamma_0.reshape(-1) > 0
        if bool(positive.all()):
            self.index = None  # dense: no gather
            self.m_0, self.m_1 = flat.to(device), gamma_1.reshape(-1).to(device)
        else:
            index = positive.nonzero()[:, 0]
            self.m_0, self.m_1 = flat[index].to(device), gamma_1.reshape(-1)[index].to(device)
            self.index = index.to(device)
        self.cdf = torch.cumsum(self.m_0, 0)

    def __call__(self, n: int, generator: torch.Generator) -> tuple[torch.Tensor, ...]:
        u = rand((n,), generator=generator, device=self.cdf.device, dtype=torch.float64)
        kept = torch.searchsorted(self.cdf, u * self.cdf[-1], right=True).clamp_max_(self.cdf.numel() - 1)
        flat = kept if self.index is None else self.index[kept]
        return flat // self.n1, flat % self.n1, self.m_0[kept], self.m_1[kept]


class WFRSampler:
    """WFR-FM targets: pairs (i, j) ~ gamma_0 with masses (gamma_0[i, j], gamma_1[i, j]), a point on the
    closed-form Dirac WFR geodesic at s ~ U[0, 1], its velocity and growth, weight m(s) / m_0.

    `straight=True` gives UOT-CFM's targets instead: the same pairs, the straight path, no growth, weight 1.
    """

    def __init__(
        self,
        series: TimeSeries,
        plans: UnbalancedPlans,
        *,
        batch: int,
        sigma: float = 0.0,
        straight: bool = False,
        device: torch.device | str = "cpu",
    ) -> None:
        self.X = [x.to(device) for x in series.X]
        self.plans = plans
        self.path = WFRDiracPath(plans.delta, sigma=sigma)
        self.batch = int(batch)
        self.straight = bool(straight)
        self.start, self.dt = _interval_times(series)
        self.draws = [_PairDraw(plan, device) for plan in plans.plans]

    def __call__(self, step: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
        """One batch of WFR targets over every interval: a dict of `x`, `u`: (N, d) and `t`, `g`, `w`: (N,),
        concatenated over the intervals."""
        parts: list[dict[str, torch.Tensor]] = []
        for k, draw in enumerate(self.draws):
            i, j, m0, m1 = draw(self.batch, generator)
            x0, x1 = self.X[k][i], self.X[k + 1][j]
            keep = self.path.reachable(x0, x1)
            x0, x1 = x0[keep], x1[keep]
            m0, m1 = m0[keep].to(x0.dtype), m1[keep].to(x0.dtype)
            s = rand((x0.shape[0],), generator=generator, device=x0.device).to(x0.dtype)
            t = self.start[k] + s * self.dt[k]
            if self.straight:
                x_s = x0 + s[:, None] * (x1 - x0)
                if self.path.sigma > 0:
                    x_s = x_s + self.path.sigma * randn(x_s.shape, generator=generator, device=x_s.device).to(x_s.dtype)
                u = (x1 - x0) / self.dt[k]
                parts.append({"x": x_s, "t": t, "u": u, "g": torch.zeros_like(s), "w": torch.ones_like(s)})
            else:
                ps = self.path.sample(x0, x1, m0, m1, s, dt=self.dt[k], generator=generator)
                parts.append({"x": ps.x_s, "t": t, "u": ps.u, "g": ps.g, "w": ps.weight})
        return {key: torch.cat([p[key] for p in parts]) for key in parts[0]}


class ExactOTSampler:
    """OT-CFM targets: per interval, `batch` cells drawn uniformly from each side, paired by exact minibatch
    OT (balanced, a permutation), the straight path, no growth, weight 1."""

    def __init__(self, series: TimeSeries, *, batch: int, device: torch.device | str = "cpu") -> None:
        self.X = [x.to(device) for x in series.X]
        self.batch = int(batch)
        self.coupling = ExactOTCoupling()
        self.start, self.dt = _interval_times(series)

    def __call__(self, step: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
        """OT-paired straight-path targets for every interval, in `WFRSampler`'s format (`g` = 0, `w` = 1)."""
        parts = []
        for k in range(len(self.X) - 1):
            n0, n1 = self.X[k].shape[0], self.X[k + 1].shape[0]
            i = randint(n0, (self.batch,), generator=generator, device=self.X[k].device)
            j = randint(n1, (self.batch,), generator=generator, device=self.X[k].device)
            pair = self.coupling.pair(self.X[k][i], self.X[k + 1][j])
            s = rand((self.batch,), generator=generator, device=pair.x_0.device).to(pair.x_0.dtype)
            x_s = pair.x_0 + s[:, None] * (pair.x_1 - pair.x_0)
            u = (pair.x_1 - pair.x_0) / self.dt[k]
            t = self.start[k] + s * self.dt[k]
            parts.append({"x": x_s, "t": t, "u": u, "g": torch.zeros_like(s), "w": torch.ones_like(s)})
        return {key: torch.cat([p[key] for p in parts]) for key in parts[0]}


def matching_loss(model: nn.Module, batch: dict[str, torch.Tensor], generator: torch.Generator):
    """CUFM loss: mean(w ‖v(t, x) − u‖²) + mean(w (g(t, x) − g)²) (the growth term only if the model has one)."""
    x, t, w = batch["x"], batch["t"], batch["w"]
    loss_v = flow_matching_loss(model(x=x, t=t), batch["u"], weight=w)
    if getattr(model, "g", None) is None:
        return loss_v, {"loss_v": loss_v.detach()}
    loss_g = flow_matching_loss(model.growth(x=x, t=t)[:, None], batch["g"][:, None], weight=w)
    return loss_v + loss_g, {"loss_v": loss_v.detach(), "loss_g": loss_g.detach()}


def train_matching(
    fields: nn.Module,
    sampler: Callable[[int, torch.Generator], Any],
    *,
    iters: int,
    lr: float,
    lr_min: float,
    ema: float | None,
    device: torch.device,
    generator: torch.Generator,
    callbacks: Sequence[Callable[[Any], None]] = (),
    progress: bool = False,
) -> FitResult:
    """Adam (one parameter group per network, as the reference's two optimisers) with cosine decay to `lr_min`,
    no clipping, EMA of the weights with a warm-up (copied into `fields` at the end), through the core's `fit`."""
    groups = [{"params": list(fields.v.parameters())}]
    if getattr(fields, "g", None) is not None:
        groups.append({"params": list(fields.g.parameters())})
    optimizer = torch.optim.Adam(groups, lr=lr)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=iters, eta_min=lr_min)
    # the average copies the weights for the first tenth of a run (at most 100 steps), so a short run's model
    # does not keep a share of the random initialisation
    averager = EMA(fields, decay=ema, warmup_steps=min(100, iters // 10)) if ema else None
    result = fit(
        fields,
        matching_loss,
        sampler,
        steps=iters,
        optimizer=optimizer,
        lr_schedule=schedule,
        ema=averager,
        grad_clip=None,
        device=device,
        generator=generator,
        callbacks=callbacks,
        log_every=max(1, math.ceil(iters / 20)),
        progress=progress,
    )
    if averager is not None:
        fields.load_state_dict(averager.shadow)
    return result
