"""Routing analysis on routing tables: a table (C, E) counts the (token, expert) pairs of the tokens of each class
c routed to expert e (a top-1 layer gives one pair per token; expert choice one per pick).

- `expert_class_nmi`: normalised mutual information between expert and class (arithmetic normalisation, as
  scikit-learn's default); 1 when the expert determines the class and back, 0 when independent.
- `utilisation_divergence`: Jensen-Shannon divergence (nats, at most log 2) between the expert histograms of two
  disjoint class subsets; higher means the subsets use different experts.
- `utilisation_entropy`: entropy of the expert histogram divided by log E (1: uniform load); `dead_experts`.
- `subspace_similarity`: the mean cosine of the principal angles between experts' top-`rank` left singular
  subspaces of their first-layer weights (1: the same subspace; lower is more diverse).
- `routing_heatmap`: each class's share of tokens per expert, as an image.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence

import torch

from flowlab.core.validation import check_tensor

__all__ = [
    "contingency",
    "dead_experts",
    "expert_class_nmi",
    "routing_heatmap",
    "subspace_similarity",
    "utilisation_divergence",
    "utilisation_entropy",
]


def _table(table: object, name: str = "table", *, empty: bool = False) -> torch.Tensor:
    check_tensor(table, name, min_dim=2)
    if table.dim() != 2 or bool((table < 0).any()) or not (empty or float(table.sum()) > 0):
        raise ValueError(f"{name}: expected non-negative counts (C, E)" + ("" if empty else " with a positive total"))
    return table.double()


def _entropy(p: torch.Tensor) -> torch.Tensor:
    p = p[p > 0]
    return -(p * p.log()).sum()


def contingency(dispatch: torch.Tensor, labels: torch.Tensor, num_classes: int) -> torch.Tensor:
    """dispatch: (T, E) bool or 0/1 (which experts took token i), labels: (T,) int64 in [0, num_classes) ->
    the routing table (num_classes, E) float64 of counts."""
    if dispatch.dim() != 2 or labels.shape != dispatch.shape[:1]:
        raise ValueError(f"dispatch, labels: expected (T, E) and (T,), got {tuple(dispatch.shape)}, "
                         f"{tuple(labels.shape)}")  # fmt: skip
    onehot = torch.nn.functional.one_hot(labels, num_classes).double()
    return onehot.T @ dispatch.double()


def expert_class_nmi(table: torch.Tensor) -> float:
    """NMI between class and expert of a routing table (C, E): I(c; e) / ((H(c) + H(e)) / 2); 0 when both
    entropies vanish."""
    p = _table(table)
    p = p / p.sum()
    pc, pe = p.sum(1), p.sum(0)
    outer = pc[:, None] * pe[None, :]
    nz = p > 0
    mutual = (p[nz] * (p[nz] / outer[nz]).log()).sum()
    denominator = (_entropy(pc) + _entropy(pe)) / 2
    return float(mutual / denominator) if float(denominator) > 0 else 0.0


def utilisation_divergence(table: torch.Tensor, subset_a: Sequence[int], subset_b: Sequence[int]) -> float:
    """Jensen-Shannon divergence (nats) between the expert histograms of the classes `subset_a` and `subset_b`
    (rows of a routing table (C, E))."""
    t = _table(table)
    if not subset_a or not subset_b or set(subset_a) & set(subset_b):
        raise ValueError(f"subset_a, subset_b: expected two non-empty disjoint sets of classes, got {subset_a}, "
                         f"{subset_b}")  # fmt: skip
    pa, pb = t[list(subset_a)].sum(0), t[list(subset_b)].sum(0)
    if not (float(pa.sum()) > 0 and float(pb.sum()) > 0):
        raise ValueError("table: each class subset needs at least one routed token")
    pa, pb = pa / pa.sum(), pb / pb.sum()
    mid = (pa + pb) / 2
    return float((_entropy(mid) - (_entropy(pa) + _entropy(pb)) / 2).clamp(min=0))


def utilisation_entropy(counts: torch.Tensor) -> float:
    """counts: (E,) tokens per expert -> the entropy of their shares over log E, in [0, 1] (1 for E = 1)."""
    c = _table(counts[None]).squeeze(0)
    return float(_entropy(c / c.sum()) / math.log(c.numel())) if c.numel() > 1 else 1.0


def dead_experts(counts: torch.Tensor) -> int:
    """counts: (E,) tokens per expert -> how many received none (all E when no token was routed)."""
    return int((_table(counts[None], empty=True) == 0).sum())


def subspace_similarity(weights: torch.Tensor, rank: int) -> float:
    """weights: (E, dim, hidden) the experts' first-layer weights -> the mean over expert pairs of the mean cosine
    of the principal angles between their top-`rank` left singular subspaces of R^dim."""
    check_tensor(weights, "weights", min_dim=3)
    e = weights.shape[0]
    if weights.dim() != 3 or e < 2:
        raise ValueError(f"weights: expected (E, dim, hidden) with E >= 2 experts, got {tuple(weights.shape)}")
    if not (isinstance(rank, int) and 1 <= rank <= min(weights.shape[1:])):
        raise ValueError(f"rank: expected an integer in [1, {min(weights.shape[1:])}], got {rank!r}")
    bases = torch.linalg.svd(weights.detach().double(), full_matrices=False).U[..., :rank]  # (E, dim, rank)
    cosines = torch.linalg.svdvals(bases[:, None].transpose(-1, -2) @ bases[None])  # (E, E, rank)
    pairs = torch.triu_indices(e, e, offset=1)
    return float(cosines[pairs[0], pairs[1]].clamp(max=1).mean())


def routing_heatmap(path: str | os.PathLike[str], tables: Mapping[str, torch.Tensor]) -> None:
    """One panel per routing table (C, E) (title -> table): each class's share of its tokens per expert on one
    colour scale, saved as a PNG at `path`."""
    from flowlab.core.bench import figure

    if not tables:
        raise ValueError("tables: expected at least one named routing table")
    shares = {name: _table(t, f"tables[{name!r}]") for name, t in tables.items()}
    shares = {name: (t / t.sum(1, keepdim=True).clamp(min=1e-12)).numpy() for name, t in shares.items()}
    top = max(float(share.max()) for share in shares.values())  # one colour scale for every panel
    with figure(path, ncols=len(shares), size=(3.2 * len(shares), 3.4), squeeze=False) as (fig, axes):
        for ax, (name, share) in zip(axes[0], shares.items(), strict=True):
            image = ax.imshow(share, cmap="viridis", vmin=0, vmax=top, aspect="auto")
            ax.grid(False)
            ax.set(title=name, xlabel="expert", ylabel="class", xticks=range(share.shape[1]),
                   yticks=range(share.shape[0]))  # fmt: skip
            fig.colorbar(image, ax=ax, label="share of the class's tokens")
