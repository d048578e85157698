"""The auxiliary losses of the MoE layers: ProMoE's routing contrastive loss and the token-choice baseline's
Switch-style load-balancing loss, each a scalar computed in float32 at least."""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["load_balancing_loss", "routing_contrastive_loss"]


def routing_contrastive_loss(
    tokens: torch.Tensor, assignments: torch.Tensor, prototypes: torch.Tensor, *, tau: float = 0.07
) -> torch.Tensor:
    """ProMoE's routing contrastive loss (RCL): tokens (T, dim), assignments (T,) int64 (the expert of each token in
    [0, E), or -1 for a token left out, e.g. an unconditional one), prototypes (E, dim) -> scalar.

    m_j is the mean of the tokens assigned to expert j; over the N_a experts with at least one token,
    L = -(1/N_a) sum_j log softmax_{j'}(cos(p_j, m_j') / tau)[j], the cross-entropy of the N_a x N_a similarity
    matrix with diagonal targets; 0 when N_a < 2. Gradients reach the prototypes and the tokens (m_j is not
    detached). Vectorised: the sums by `index_add`, inactive experts masked out (no host read)."""
    if not tau > 0:
        raise ValueError(f"tau: expected a positive temperature, got {tau!r}")
    e, dtype = prototypes.shape[0], torch.promote_types(tokens.dtype, torch.float32)
    keep = assignments >= 0
    slot = torch.where(keep, assignments, e)  # left-out tokens go to a spare row, dropped below
    sums = tokens.new_zeros(e + 1, tokens.shape[1], dtype=dtype).index_add(0, slot, tokens.to(dtype))[:e]
    counts = torch.bincount(slot, minlength=e + 1)[:e]
    active = counts > 0
    centroids = sums / counts.clamp(min=1)[:, None]
    logits = F.normalize(prototypes.to(dtype), dim=-1) @ F.normalize(centroids, dim=-1).T / tau
    logits = logits.masked_fill(~active[None, :], -1e9)  # finite: an empty row stays NaN-free
    diagonal = torch.arange(e, device=tokens.device)
    per_expert = -logits.log_softmax(-1)[diagonal, diagonal]
    n_active = active.sum()
    loss = torch.where(active, per_expert, 0.0).sum() / n_active.clamp(min=1)
    return torch.where(n_active >= 2, loss, 0.0)


def load_balancing_loss(scores: torch.Tensor, expert: torch.Tensor) -> torch.Tensor:
    """Switch Transformer's load-balancing loss E sum_j f_j P_j: scores (T, E) routing probabilities, expert (T,)
    the chosen experts; f_j the share of tokens sent to j, P_j the mean probability of j. 1 at perfect balance."""
    e = scores.shape[1]
    share = torch.bincount(expert, minlength=e).to(scores.dtype) / max(expert.shape[0], 1)
    return e * (share * scores.mean(0)).sum()
