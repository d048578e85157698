"""Attention over one block of keys with its row log-sum-exp (`partial_attention`), and the online-softmax merge of
such blocks into attention over their union (`merge_partials`): the pieces of ring, blockwise and sequence-parallel
attention, exact in any dtype up to rounding."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

__all__ = ["PartialAttention", "merge_partials", "partial_attention"]


@dataclass(frozen=True)
class PartialAttention:
    """Softmax attention of queries over one block of keys: `out` (..., Nq, Dv), normalised within the block, and
    `lse` (..., Nq), the log-sum-exp of the block's scaled scores (-inf where a row has no allowed key; its `out` row
    is then 0)."""

    out: torch.Tensor
    lse: torch.Tensor


def partial_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None
) -> PartialAttention:
    """Attention of q: (..., Nq, D) over k: (..., Nk, D), v: (..., Nk, Dv), scaled by 1 / sqrt(D), where the bool
    `mask` (broadcastable to (..., Nq, Nk); True = attend) allows; -> `PartialAttention` with out (..., Nq, Dv)
    and lse (..., Nq). Fully masked rows (or Nk = 0) give out 0 and lse -inf, never NaN."""
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError(f"q, k, v: expected (..., Nq, D), (..., Nk, D), (..., Nk, Dv), got "
                         f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")  # fmt: skip
    if mask is not None and mask.dtype != torch.bool:
        raise ValueError(f"mask: expected a bool tensor (True = attend), got {mask.dtype}")
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf)
    lse = torch.logsumexp(scores, dim=-1)
    finite = torch.isfinite(lse)
    weights = torch.exp(scores - torch.where(finite, lse, torch.zeros_like(lse))[..., None])
    return PartialAttention(out=weights @ v, lse=lse)


def merge_partials(parts: Sequence[PartialAttention]) -> PartialAttention:
    """The attention over the union of the key blocks of `parts` (each out (..., Nq, Dv), lse (..., Nq), the same
    queries): lse = logsumexp_b lse_b, out = sum_b exp(lse_b - lse) * out_b. Rows that every block masks stay 0
    with lse -inf."""
    if not parts:
        raise ValueError("parts: expected at least one PartialAttention")
    lses = torch.stack([p.lse for p in parts])  # (P, ..., Nq)
    lse = torch.logsumexp(lses, dim=0)
    safe = torch.where(torch.isfinite(lse), lse, torch.zeros_like(lse))
    scale = torch.exp(lses - safe)  # exp(-inf) = 0 for masked blocks and rows
    out = sum(s[..., None] * p.out for s, p in zip(scale, parts, strict=True))
    return PartialAttention(out=out, lse=lse)
