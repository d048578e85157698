"""Baseline trust scores (higher = more trusted), measured beside the certificate: MC-dropout and deep-ensemble
predictive variance of the regressor, and a DiffPath-style score-norm statistic of the joint score model. The
input-only likelihood baseline is `certificate(..., variant="x")`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from flowlab.trust_ood.certificate.joint_model import JointScoreModel
from flowlab.trust_ood.certificate.regressors import predict

__all__ = ["ensemble_score", "mc_dropout_score", "score_norm_statistic"]


def mc_dropout_score(
    regressor: nn.Module,
    x: torch.Tensor,
    param: torch.Tensor,
    *,
    passes: int = 20,
    generator: torch.Generator,
) -> torch.Tensor:
    """-mean over the grid of the predictive variance of `passes` dropout-on forward passes -> (B,).

    Dropout masks use torch's global RNG, seeded here from `generator` inside a forked RNG state."""
    if passes < 2:
        raise ValueError(f"passes: expected at least 2, got {passes}")
    seed = int(torch.randint(0, 2**62, (1,), generator=generator))
    was = regressor.training
    regressor.train()
    try:
        with torch.random.fork_rng(devices=[]), torch.inference_mode():
            torch.manual_seed(seed)
            outs = torch.stack([regressor(x, param) for _ in range(passes)])
    finally:
        regressor.train(was)
    return -outs.var(0).flatten(1).mean(1).clone()


def ensemble_score(members: Sequence[nn.Module], x: torch.Tensor, param: torch.Tensor) -> torch.Tensor:
    """-mean over the grid of the variance across independently trained ensemble members -> (B,)."""
    if len(members) < 2:
        raise ValueError(f"members: expected at least 2 regressors, got {len(members)}")
    outs = torch.stack([predict(m, x, param) for m in members])
    return -outs.var(0).flatten(1).mean(1)


def score_norm_statistic(
    model: JointScoreModel, fields: torch.Tensor, *, levels: int = 8, generator: torch.Generator
) -> torch.Tensor:
    """DiffPath-lite: -mean over `levels` noise levels (tau log-spaced in [1e-3, 1]) of ||s(tau) s_theta(z_tau)||^2 /
    D on noised standardised fields z_tau = z + s(tau) n (one shared noise draw per sample) -> (B,)."""
    model.check_fields(fields, "fields")
    z = model.standardise(fields)
    noise = torch.randn(z.shape, generator=generator).to(z)
    taus = torch.logspace(-3, 0, levels, dtype=z.dtype)
    total = torch.zeros(z.shape[0], dtype=z.dtype, device=z.device)
    was = model.training
    model.eval()
    try:
        with torch.inference_mode():
            for tau in taus:
                t = (1 - tau).expand(z.shape[0]).to(z.device)
                s = model.schedule(t).sigma[:, None, None].to(z)
                total += (s * model(x=z + s * noise, t=t)).square().flatten(1).mean(1)
    finally:
        model.train(was)
    return -(total / levels).clone()
