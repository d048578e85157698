"""Easy consistency models (ECT, Geng et al. 2024): the ECM loss in EDM noise levels, with its step schedule.

A consistency function f(x; sigma) (an `ECMPreconditioner`, called `f(x=, sigma=(B,), **cond)`) maps a noisy state
to its clean endpoint. Per sample: t = exp(N(p_mean, p_std^2)), the earlier level r = `ecm_target_level(t)`, one
noise direction e shared by both levels, and

    loss = d(f(y + t e; t), sg[f(x_r; r)]) / (t - r),   d(a, b) = sqrt(|a - b|^2 + c^2) - c,

where x_r = y + r e (consistency training) or the teacher's one Heun step from y + t e down to r (consistency
distillation), and the target is x_r itself where r = 0 (f(x; 0) = x). Both passes see the same random state, so
dropout masks agree. CMT post-trains with a constant small step (q = 4096, stage 0); ECT doubles q's exponent
every stage (q = 2, stage = step // steps_per_stage).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from flowlab.core.distributions import randn
from flowlab.core.losses.flow_map import pseudo_huber
from flowlab.core.losses.flow_matching import reduce_loss
from flowlab.core.validation import check_tensor, expand_like

__all__ = ["ecm_loss", "ecm_target_level", "heun_level_step"]


def _check_number(value: Any, name: str, *, low: float, strict: bool = True) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or not (value > low if strict else value >= low):
        raise ValueError(f"{name}: expected a finite number {'>' if strict else '>='} {low}, got {value!r}")
    return float(value)


def ecm_target_level(t: torch.Tensor, *, q: float, stage: int = 0, k: float = 8.0, b: float = 1.0) -> torch.Tensor:
    """The ECT pairing r = max(0, t (1 - (1 + k sigmoid(-b t)) / q^(stage + 1))): t: (B,) > 0 -> r: (B,), r < t.

    The relative step (1 + k sigmoid(-b t)) / q^(stage+1) is about (1 + k/2)/q^(stage+1) at small t and 1/q^(stage+1)
    at large t; r is 0 (the data) where the step would pass it."""
    check_tensor(t, "t")
    _check_number(q, "q", low=1.0)
    if not (isinstance(stage, int) and not isinstance(stage, bool) and stage >= 0):
        raise ValueError(f"stage: expected an int >= 0, got {stage!r}")
    _check_number(k, "k", low=0.0, strict=False)
    _check_number(b, "b", low=0.0, strict=False)
    if bool((t <= 0).any()):
        raise ValueError("t: expected noise levels > 0")
    decay = float(q) ** -(stage + 1)
    return (t * (1 - decay * (1 + k * torch.sigmoid(-b * t)))).clamp_min(0.0)


def heun_level_step(
    denoiser: Any, x: torch.Tensor, sigma: torch.Tensor, sigma_next: torch.Tensor, **cond: Any
) -> torch.Tensor:
    """One Heun step of the probability-flow ODE dx/dsigma = (x - D(x; sigma)) / sigma, per sample, from sigma to
    sigma_next (both (B,), sigma > 0, sigma_next >= 0); an Euler step (the denoised state) where sigma_next = 0.
    x: (B, ...) -> (B, ...). `denoiser(x=, sigma=(B,), **cond)` -> E[x_data | x]."""
    d = (x - denoiser(x=x, sigma=sigma, **cond)) / expand_like(sigma, x)
    h = expand_like(sigma_next - sigma, x)
    euler = x + h * d
    positive = sigma_next > 0
    if not bool(positive.any()):
        return euler
    level = torch.where(positive, sigma_next, sigma)  # any positive level where the correction is unused
    d_next = (euler - denoiser(x=euler, sigma=level, **cond)) / expand_like(level, x)
    return torch.where(expand_like(positive, x), x + 0.5 * h * (d + d_next), euler)


def ecm_loss(
    consistency_fn: Any,
    x_1: torch.Tensor,
    *,
    q: float,
    stage: int = 0,
    k: float = 8.0,
    b: float = 1.0,
    p_mean: float = -1.1,
    p_std: float = 2.0,
    c: float | None = None,
    teacher: Any = None,
    target_fn: Any = None,
    generator: torch.Generator | None = None,
    reduction: str = "mean",
    **cond: Any,
) -> torch.Tensor:
    """The ECM loss of `consistency_fn` on data x_1: (B, ...) (y in the module docstring); a scalar, or (B,) with
    "none"; `cond` goes to every network call (e.g. class labels y=).

    q, stage, k, b: the pairing of `ecm_target_level`; p_mean, p_std: ln t ~ N(p_mean, p_std^2); c: the
    pseudo-Huber constant (None: 0.00054 sqrt(D), D = coordinates per sample; 0: the L2 norm). teacher: an EDM
    denoiser `teacher(x=, sigma=, **cond)` makes it consistency distillation (x_r by `heun_level_step`);
    target_fn: the network giving the target (e.g. an EMA copy; None: consistency_fn itself under no_grad).
    Noise is drawn with `generator` (on its device, moved to x_1's).
    """
    for name, fn in (("consistency_fn", consistency_fn), ("teacher", teacher), ("target_fn", target_fn)):
        if fn is not None and not callable(fn):
            raise ValueError(f"{name}: expected a callable f(x=, sigma=), got {type(fn).__name__}")
    if consistency_fn is None:
        raise ValueError("consistency_fn: expected a callable f(x=, sigma=), got None")
    y = check_tensor(x_1, "x_1", min_dim=2)
    _check_number(p_std, "p_std", low=0.0, strict=False)
    _check_number(p_mean, "p_mean", low=-math.inf)
    if c is not None:
        _check_number(c, "c", low=0.0, strict=False)
    batch, device, dtype = y.shape[0], y.device, y.dtype
    t = torch.exp(p_mean + p_std * randn((batch,), generator=generator, device=device, dtype=dtype))
    r = ecm_target_level(t, q=q, stage=stage, k=k, b=b)
    eps = randn(y.shape, generator=generator, device=device, dtype=dtype)
    y_t = y + expand_like(t, y) * eps
    net = consistency_fn if target_fn is None else target_fn
    devices = [device] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices), torch.no_grad():  # the target pass leaves the random state as found
        x_r = y + expand_like(r, y) * eps if teacher is None else heun_level_step(teacher, y_t, t, r, **cond)
        positive = r > 0
        target = x_r
        if bool(positive.any()):
            level = torch.where(positive, r, t)
            target = torch.where(expand_like(positive, y), net(x=x_r, sigma=level, **cond), x_r)
        target = torch.nan_to_num(target).detach()
    sq = (consistency_fn(x=y_t, sigma=t, **cond) - target).pow(2).flatten(1).sum(1)
    return reduce_loss(pseudo_huber(sq, y[0].numel(), c) / (t - r), weight=None, reduction=reduction)
