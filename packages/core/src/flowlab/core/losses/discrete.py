"""Losses for discrete (token) paths: the masked-diffusion continuous-time NELBO."""

from __future__ import annotations

import torch

from flowlab.core.paths.base import DiscretePathSample
from flowlab.core.paths.discrete import MaskedDiscretePath
from flowlab.core.validation import check_choice, check_tensor

__all__ = ["masked_diffusion_loss"]


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
    if not isinstance(sample, DiscretePathSample):
        raise ValueError(f"sample: expected a DiscretePathSample, got {type(sample).__name__}")
    if not isinstance(path, MaskedDiscretePath):
        raise ValueError(f"path: expected a MaskedDiscretePath, got {type(path).__name__}")
    check_choice(reduction, ("mean", "sum", "none"), "reduction")
    check_tensor(logits, "logits", min_dim=3)
    x_1, x_t = sample.x_1, sample.x_t
    if logits.dim() != x_1.dim() + 1 or logits.shape[:-1] != x_1.shape:
        raise ValueError(f"logits: expected shape {(*x_1.shape, 'V')}, got {tuple(logits.shape)}")
    vocab = logits.shape[-1]
    if bool((x_1 >= vocab).any()):
        raise ValueError(f"logits: data tokens reach {int(x_1.max())} but only {vocab} logits are given")

    logits = logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits
    if path.mask_id < vocab:
        logits = logits.index_fill(-1, torch.tensor([path.mask_id], device=logits.device), float("-inf"))
    nll = -torch.log_softmax(logits, dim=-1).gather(-1, x_1.unsqueeze(-1)).squeeze(-1)
    masked = x_t == path.mask_id
    nll = torch.where(masked, nll, torch.zeros_like(nll))  # carry-over: unmasked tokens are given, cost 0

    kappa, d_kappa = path.kappa_at(sample.t.to(nll.dtype))
    left = 1 - kappa
    weight = torch.where(left > 0, d_kappa / left.clamp_min(torch.finfo(left.dtype).tiny), 0)
    loss = weight.reshape(-1, *([1] * (nll.dim() - 1))) * nll
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss
