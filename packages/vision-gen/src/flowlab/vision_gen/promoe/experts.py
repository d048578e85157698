"""A bank of E two-layer experts held as stacked weights, and the batched top-1 dispatch of tokens to them.

Each expert is Linear(dim, hidden) -> GELU (tanh) -> Linear(hidden, dim), the core's `dense_mlp` shape. The bank
runs all experts at once on a padded (E, C, dim) buffer with two batched matmuls, so there is no Python loop over
tokens or experts, and every expert is in the graph on every call: an expert that receives no token still gets a
(zero) gradient, which keeps DistributedDataParallel's gradient buckets in step (the official code's dummy call).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["ExpertBank", "dispatch_top1", "positive_int"]


def positive_int(value: object, name: str) -> int:
    """value, or a ValueError naming `name` unless it is an int >= 1."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name}: expected an integer >= 1, got {value!r}")
    return value


class ExpertBank(nn.Module):
    """`num_experts` experts dim -> hidden -> dim (GELU, tanh approximation): w1 (E, dim, hidden), b1 (E, hidden),
    w2 (E, hidden, dim), b2 (E, dim), each initialised like the `nn.Linear` it stands for."""

    def __init__(self, num_experts: int, dim: int, hidden: int) -> None:
        super().__init__()
        self.num_experts = positive_int(num_experts, "num_experts")
        self.dim, self.hidden = positive_int(dim, "dim"), positive_int(hidden, "hidden")
        self.w1 = nn.Parameter(torch.empty(num_experts, dim, hidden))
        self.b1 = nn.Parameter(torch.empty(num_experts, hidden))
        self.w2 = nn.Parameter(torch.empty(num_experts, hidden, dim))
        self.b2 = nn.Parameter(torch.empty(num_experts, dim))
        for w, b, fan_in in ((self.w1, self.b1, dim), (self.w2, self.b2, hidden)):
            bound = 1 / math.sqrt(fan_in)
            nn.init.uniform_(w, -bound, bound)
            nn.init.uniform_(b, -bound, bound)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (E, C, dim), row e of it for expert e -> (E, C, dim)."""
        h = F.gelu(torch.baddbmm(self.b1[:, None], x, self.w1), approximate="tanh")
        return torch.baddbmm(self.b2[:, None], h, self.w2)

    def extra_repr(self) -> str:
        """The bank's size, for the module's repr."""
        return f"num_experts={self.num_experts}, dim={self.dim}, hidden={self.hidden}"


def dispatch_top1(bank: ExpertBank, x: torch.Tensor, expert: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
    """x: (T, dim) tokens, expert: (T,) int64 in [0, E), gate: (T,) -> (T, dim): gate_i * bank[expert_i](x_i).

    Tokens are sorted by expert (stable), each gets its rank inside its expert's group, and the groups are
    scattered into a zero-padded (E, C, dim) buffer with C the largest group (one host read per call), run through
    the bank in two batched matmuls and gathered back in token order."""
    t, e = x.shape[0], bank.num_experts
    order = torch.argsort(expert, stable=True)
    sorted_expert = expert[order]
    counts = torch.bincount(expert, minlength=e)
    rank = torch.arange(t, device=x.device) - (counts.cumsum(0) - counts)[sorted_expert]
    capacity = int(counts.max()) if t else 0
    buffer = x.new_zeros(e, capacity, x.shape[1]).index_put((sorted_expert, rank), x[order])
    out = bank(buffer)[sorted_expert, rank] * gate[order, None].to(x.dtype)
    return torch.zeros_like(x).index_copy(0, order, out)
