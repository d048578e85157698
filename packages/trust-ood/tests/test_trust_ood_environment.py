"""The score-SDE VE schedule the certificates use: its variance is the integral of g^2 (std^2 = int_0^tau g^2)."""

from __future__ import annotations

import math

import torch

from flowlab.core.schedules import VE


def test_score_sde_variance_is_integral_of_squared_diffusion():
    schedule = VE.score_sde(25.0)
    tau = torch.linspace(0.05, 1.0, 20, dtype=torch.float64)
    s = torch.linspace(0, 1, 20001, dtype=torch.float64)
    for tau_k in tau:
        grid = s * tau_k
        g2 = schedule.diffusion(1 - grid) ** 2
        integral = torch.trapezoid(g2, grid)
        std = schedule(1 - tau_k.reshape(1)).sigma
        assert math.isclose(float(std**2), float(integral), rel_tol=1e-6)
