"""Losses for discrete (token) paths: the continuous-time NELBOs of the masked and the uniform mixture paths."""

from __future__ import annotations

import torch

from flowlab.core.paths.base import DiscretePathSample
from flowlab.core.paths.discrete import MaskedDiscretePath, UniformDiscretePath
from flowlab.core.validation import check_choice, check_tensor

__all__ = ["masked_diffusion_loss", "uniform_diffusion_loss"]


def _check_logits(logits: torch.Tensor, sample: DiscretePathSample) -> torch.Tensor:
    if not isinstance(sample, DiscretePathSample):
        raise ValueError(f"sample: expected a DiscretePathSample, got {type(sample).__name__}")
    check_tensor(logits, "logits", min_dim=3)
    x_1 = sample.x_1
    if logits.dim() != x_1.dim() + 1 or logits.shape[:-1] != x_1.shape:
        raise ValueError(f"logits: expected shape {(*x_1.shape, 'V')}, got {tuple(logits.shape)}")
    if bool((x_1 >= logits.shape[-1]).any()):
        raise ValueError(f"logits: data tokens reach {int(x_1.max())} but only {logits.shape[-1]} logits are given")
    return logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits


def _rate_weighted(loss: torch.Tensor, sample: DiscretePathSample, path, reduction: str) -> torch.Tensor:
    """loss (B, L) times the path's rate kappa'_t / (1 - kappa_t) (0 where kappa_t = 1), reduced."""
    kappa, d_kappa = path.kappa_at(sample.t.to(loss.dtype))
    left = 1 - kappa
    weight = torch.where(left > 0, d_kappa / left.clamp_min(torch.finfo(left.dtype).tiny), 0)
    loss = weight.reshape(-1, *([1] * (loss.dim() - 1))) * loss
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def masked_diffusion_loss(
    logits: torch.Tensor, sample: DiscretePathSample, path: MaskedDiscretePath, *, reduction: str = "mean"
) -> torch.Tensor:
    """MDLM's continuous-time NELBO with the SUBS parameterisation (Sahoo et al. 2024), in core time.

    logits: (B, L, V) of p_theta(x_1 | x_t); sample: a `MaskedDiscretePath` draw (x_1, x_t: (B, L), t: (B,)).
    SUBS: the mask token's logit is -inf (when mask_id < V) and unmasked positions carry their input over, so they
    cost nothing. A masked position costs -log p_theta(x_1 | x_t) * kappa'_t / (1 - kappa_t), which is MDLM's
    sigma'(tau) / expm1(sigma(tau)) with tau = 1 - t. For independent draws t ~ U(0, 1) and x_t ~ p_t(. | x_1) the
    expected per-token loss is the NELBO per token, an upper bound on -log p(x_1) that is tight for the true
    posterior of independent tokens.
    reduction: "mean" (over all B*L tokens, masked or not), "sum", or "none" -> (B, L).
    """
    if not isinstance(path, MaskedDiscretePath):
        raise ValueError(f"path: expected a MaskedDiscretePath, got {type(path).__name__}")
    check_choice(reduction, ("mean", "sum", "none"), "reduction")
    logits = _check_logits(logits, sample)
    x_1, x_t, vocab = sample.x_1, sample.x_t, logits.shape[-1]
    if path.mask_id < vocab:
        logits = logits.index_fill(-1, torch.tensor([path.mask_id], device=logits.device), float("-inf"))
    nll = -torch.log_softmax(logits, dim=-1).gather(-1, x_1.unsqueeze(-1)).squeeze(-1)
    masked = x_t == path.mask_id
    nll = torch.where(masked, nll, torch.zeros_like(nll))  # carry-over: unmasked tokens are given, cost 0
    return _rate_weighted(nll, sample, path, reduction)


def uniform_diffusion_loss(
    logits: torch.Tensor, sample: DiscretePathSample, path: UniformDiscretePath, *, reduction: str = "mean"
) -> torch.Tensor:
    """The continuous-time NELBO of uniform discrete diffusion (Campbell et al. 2022; SEDD-uniform, UDLM): the
    generalised KL sum_y (R log(R / R_theta) - R + R_theta) between the reverse rates of the Markov noising process
    behind `UniformDiscretePath` and the model's, per token.

    The path's marginal kappa_t delta_{x_1} + (1 - kappa_t) / V is that of a chain that, run from data (t = 1)
    towards t = 0, jumps to a uniformly random token at rate beta_t = kappa'_t / kappa_t. Its reverse rate from z
    to y != z given x_1 is beta_t / V * q_t(y | x_1) / q_t(z | x_1); the model's replaces x_1 by p_theta(. | z),
    R_theta(z -> y) = beta_t / V * (c + kappa_t / u_t p_theta(y | z)) with u_t = (1 - kappa_t) / V and
    c = 1 - p_theta(z | z) + p_theta(z | z) u_t / (kappa_t + u_t).
    logits: (B, L, V) of p_theta(x_1 | x_t) (V = path.vocab_size); sample: a `UniformDiscretePath` draw. For
    t ~ U(0, 1) and x_t ~ p_t(. | x_1) the expected per-token loss bounds -log p(x_1) per token (the source is
    exactly uniform at kappa = 0, so there is no prior term), with equality for the true posterior of independent
    tokens. Computed in float64 where the logits are float64, else float32; O(B L V).
    reduction: "mean" (over all B*L tokens), "sum", or "none" -> (B, L).
    """
    if not isinstance(path, UniformDiscretePath):
        raise ValueError(f"path: expected a UniformDiscretePath, got {type(path).__name__}")
    check_choice(reduction, ("mean", "sum", "none"), "reduction")
    logits = _check_logits(logits, sample)
    vocab = path.vocab_size
    if logits.shape[-1] != vocab:
        raise ValueError(f"logits: expected {vocab} logits (the path's vocab_size), got {logits.shape[-1]}")
    x_1, x_t = sample.x_1, sample.x_t
    p = torch.softmax(logits, dim=-1)
    kappa, d_kappa = path.kappa_at(sample.t.to(p.dtype))
    shape = (-1, *([1] * (x_1.dim() - 1)))
    k, u = kappa.reshape(shape), ((1 - kappa) / vocab).reshape(shape)
    tiny = torch.finfo(p.dtype).tiny
    ratio = k / u.clamp_min(tiny)  # kappa / u: q(y | x) / q(z | x) for y = x != z is 1 + ratio
    stay = p.gather(-1, x_t.unsqueeze(-1)).squeeze(-1)
    c = 1 - stay + stay * u / (k + u)
    model = c.unsqueeze(-1) + ratio.unsqueeze(-1) * p  # (B, L, V): V R_theta / beta over y
    at_data = x_t == x_1
    # V R / beta given x_1: from z = x_1 every y is u / (kappa + u); from z != x_1, y = x_1 is 1 + ratio, else 1.
    true = torch.where(at_data, u / (k + u), torch.ones_like(k)).unsqueeze(-1).expand_as(model).clone()
    true.scatter_(-1, x_1.unsqueeze(-1), torch.where(at_data, u / (k + u), 1 + ratio).unsqueeze(-1))
    bregman = true * (true.clamp_min(tiny).log() - model.clamp_min(tiny).log()) - true + model
    bregman = bregman.scatter(-1, x_t.unsqueeze(-1), 0.0).sum(-1)  # y != z only
    beta = torch.where(kappa > 0, d_kappa / kappa.clamp_min(tiny), 0) / vocab
    loss = beta.reshape(shape) * bregman
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss
