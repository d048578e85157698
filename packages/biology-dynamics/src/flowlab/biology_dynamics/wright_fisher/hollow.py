"""The hollow parametrisation: the logits at position d are a function of x_t at every other position only, so the
model's posterior q(x_0^d | x_t) ∝ p(x_t^d | x_0^d) q_theta(x_0^d | x_t^{-d}) meets its own noisy value only
through the exact likelihood ratio (which `WrightFisherELBO` multiplies in), removing the ELBO's small-tau
singularity and making likelihoods comparable across domains.

`Hollow(net)` makes any per-sequence network hollow by running it on L copies of the input, copy d with
position d's entries set to 0 (no point of the simplex, nor a one-hot letter or a sufficient statistic, is all
zeros), and keeping position d of copy d: exact, L times the cost; for the toy lengths here.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

__all__ = ["Hollow"]


class Hollow(nn.Module):
    """`hollow(x=x, **kw) -> logits`: x (B, L, C), keyword tensors with a leading batch dim B (t (B,), cond) ->
    (B, L, K) from `net` called on (B * L, L, C)."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, *, x: torch.Tensor, **kw: Any) -> torch.Tensor:
        """x: (B, L, C) -> logits (B, L, K), position i read from a copy of x with position i zeroed; batch-sized
        keyword tensors are repeated L times."""
        if not isinstance(x, torch.Tensor) or x.dim() != 3:
            raise ValueError(f"x: expected a (B, L, C) tensor, got {x!r:.60}")
        batch, length = x.shape[:2]
        keep = 1 - torch.eye(length, dtype=x.dtype, device=x.device)
        copies = (x[:, None] * keep[None, :, :, None]).reshape(batch * length, length, x.shape[-1])
        repeated = {
            k: v.repeat_interleave(length, dim=0)
            if isinstance(v, torch.Tensor) and v.dim() and v.shape[0] == batch
            else v
            for k, v in kw.items()
        }
        out = self.net(x=copies, **repeated).reshape(batch, length, length, -1)
        return out.diagonal(dim1=1, dim2=2).transpose(1, 2)
