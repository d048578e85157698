"""Value Flows' critic objective (BCFM, DCFM, confidence weights) and the baselines' distributional TD losses."""

from __future__ import annotations

import torch

from flowlab.core.losses import flow_matching_loss
from flowlab.core.paths import AffinePath
from flowlab.core.schedules import CondOT

__all__ = ["bcfm_loss", "c51_target", "confidence_weights", "dcfm_loss", "quantile_huber_loss"]

_PATH = AffinePath(CondOT())


def confidence_weights(spread: torch.Tensor, temp: float) -> torch.Tensor:
    """w = sigmoid(-temp / spread) + 0.5 in [0.5, 1), without gradient. spread: (B,) >= 0 -> (B,)."""
    if temp <= 0:
        raise ValueError(f"temp: expected a positive temperature, got {temp}")
    spread = spread.detach()
    return torch.sigmoid(-temp / spread.clamp_min(1e-12)) + 0.5


def bcfm_loss(velocity_fn, eps, t, returns) -> torch.Tensor:
    """Bootstrapped CFM: z_t = t R + (1 - t) eps, target R - eps, summed over critics.

    velocity_fn(z (B,), t (B,)) -> (K, B); eps, t, returns R = r + gamma mask Z': (B,) -> per-sample loss (B,)."""
    ps = _PATH.sample(eps[:, None], returns[:, None].detach(), t)
    v = velocity_fn(ps.x_t[:, 0], t)
    return sum(flow_matching_loss(vk[:, None], ps, reduction="none") for vk in v)


def dcfm_loss(
    velocity_fn, rewards, masks, gamma, t, next_z_t, next_velocity, *, scale_target: bool = False
) -> torch.Tensor:
    """Distributional CFM: at z_t = r + gamma z'_t regress v(z_t, t | s, a) onto the target velocity of the next
    state-action at (z'_t, t), NOT scaled by gamma (the reference code's form). All inputs (B,) -> (B,).

    Terminal transitions (mask 0) have no next state, so their DCFM term is masked out (the reference code keeps
    it with z_t = r, which regresses onto the field of an unrelated next state); BCFM covers them exactly.
    `scale_target=True` regresses onto gamma * v' instead: the velocity of the pushed-forward flow r + gamma phi'_t,
    exact for point-mass returns (v = gamma (c - eps) there, while the unscaled target gives c - eps). With random
    rewards the path r + gamma phi'_t starts at r + gamma eps rather than at eps, so neither form has the return law
    as its fixed point; BCFM alone does."""
    z_t = rewards + gamma * next_z_t.detach()
    v = velocity_fn(z_t, t)
    target = next_velocity.detach() * (gamma if scale_target else 1.0)
    return masks * sum((vk - target).square() for vk in v)


def c51_target(atoms, next_probs, rewards, masks, gamma) -> torch.Tensor:
    """Project r + gamma mask z_j (probabilities next_probs (B, N)) onto the atoms (N,): (B, N) target probs."""
    vmin, vmax, n = atoms[0], atoms[-1], atoms.shape[0]
    dz = (vmax - vmin) / (n - 1)
    tz = (rewards[:, None] + gamma * masks[:, None] * atoms[None]).clamp(vmin, vmax)
    b = (tz - vmin) / dz
    lo, hi = b.floor().long().clamp(0, n - 1), b.ceil().long().clamp(0, n - 1)
    w_hi = b - lo.to(b.dtype)
    w_lo = 1 - w_hi
    out = torch.zeros_like(next_probs)
    out.scatter_add_(1, lo, next_probs * w_lo)
    out.scatter_add_(1, hi, next_probs * w_hi)  # lo == hi: w_hi = 0, all mass on lo
    return out


def quantile_huber_loss(pred, taus, target, kappa: float = 1.0) -> torch.Tensor:
    """pred (B, N) at quantile levels taus (B, N), target samples (B, M) -> per-sample loss (B,)
    (sum over the N quantiles, mean over the M targets)."""
    u = target.detach()[:, None, :] - pred[:, :, None]
    huber = torch.where(u.abs() <= kappa, 0.5 * u.square(), kappa * (u.abs() - 0.5 * kappa))
    weight = (taus[:, :, None] - (u < 0).to(u.dtype)).abs()
    return (weight * huber / kappa).mean(2).sum(1)
