"""Geodesic (Riemannian flow matching) paths on a manifold (Chen & Lipman, ICLR 2024)."""

from __future__ import annotations

import torch

from flowlab.core.manifolds.base import Manifold
from flowlab.core.paths.base import PathSample
from flowlab.core.schedules import CondOT, Schedule
from flowlab.core.validation import check_same_batch, check_time

__all__ = ["GeodesicPath"]


class GeodesicPath:
    """x_t = exp_{x_0}(kappa_t log_{x_0}(x_1)) with target velocity dx_t = kappa'_t / (1 - kappa_t) log_{x_t}(x_1).

    kappa_t is the schedule's alpha_t (CondOT: kappa = t, dx_t = log_{x_t}(x_1) / (1 - t)). The velocity is the
    constant-speed form, valid only while kappa_t < 1: `sample` raises ValueError naming `t` where kappa_t >= 1, and
    it grows like 1 / (1 - t) near t = 1, so train on t in [0, 1 - 1e-3]. Paths follow the minimising geodesic
    (undefined at cut points, e.g. antipodal points on the sphere).
    """

    def __init__(self, manifold: Manifold, schedule: Schedule | None = None) -> None:
        if not isinstance(manifold, Manifold):
            raise ValueError(f"manifold: expected a flowlab.core.manifolds.Manifold, got {type(manifold).__name__}")
        schedule = CondOT() if schedule is None else schedule
        if not isinstance(schedule, Schedule):
            raise ValueError(f"schedule: expected a flowlab.core.schedules.Schedule, got {type(schedule).__name__}")
        self.manifold = manifold
        self.schedule = schedule

    def __repr__(self) -> str:
        return f"GeodesicPath({self.manifold!r}, {self.schedule!r})"

    def sample(self, x_0: torch.Tensor, x_1: torch.Tensor, t: torch.Tensor) -> PathSample:
        """x_0, x_1: (B, ambient_dim) on the manifold, t: (B,) with kappa_t < 1 -> PathSample (x_t, dx_t: (B, n))"""
        m = self.manifold
        m.check_point(x_0, "x_0")
        m.check_point(x_1, "x_1")
        batch = check_same_batch(x_0=x_0, x_1=x_1)
        check_time(t, batch)
        s = self.schedule(t.unsqueeze(-1))
        if bool((s.alpha >= 1).any()):
            raise ValueError("t: the geodesic velocity needs kappa_t < 1 (t < 1 for CondOT); sample t in [0, 1 - 1e-3]")
        x_t = m.expmap(x_0, s.alpha * m.logmap(x_0, x_1))
        dx_t = s.d_alpha / (1 - s.alpha) * m.logmap(x_t, x_1)
        return PathSample(x_0=x_0, x_1=x_1, t=t, x_t=x_t, dx_t=dx_t)
