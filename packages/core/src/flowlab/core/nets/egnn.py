"""E(n)-equivariant graph layer (Satorras, Hoogeboom & Welling 2021) over PyG-layout edge lists."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from flowlab.core.nets.mlp import _check_positive_int, activation
from flowlab.core.validation import check_choice, check_tensor

__all__ = ["EGNNLayer", "EGNNOutput"]


@dataclass(frozen=True)
class EGNNOutput:
    """Updated node features h: (N, h_dim) (E(n)-invariant) and coordinates x: (N, n) (E(n)-equivariant)."""

    h: torch.Tensor
    x: torch.Tensor


class EGNNLayer(nn.Module):
    """One EGNN layer on a graph with `edge_index: (2, E)`, row 0 = source j, row 1 = target i (PyG's
    "source_to_target" flow, as returned by `radius_graph` / `knn_graph`). For every edge j -> i:

        m_ij = phi_e(h_i, h_j, |x_i - x_j|^2, e_ij)
        x_i <- x_i + C_i sum_j (x_i - x_j) phi_x(m_ij)       C_i = 1/deg(i) ("mean", = 1/(N-1) when fully
                                                              connected) or 1 ("sum")
        h_i <- h_i + phi_h(h_i, sum_j m_ij)                   (without the "h_i +" when residual=False)

    With `normalize=True` the difference x_i - x_j is divided by (|x_i - x_j| + 1) for stability (as in E(3)
    diffusion models). h: (N, h_dim), x: (N, n) for any n, edge_attr: (E, edge_dim) -> EGNNOutput(h, x).
    Edge indices are not range-checked (no host synchronisation); out-of-range indices raise inside torch.
    """

    def __init__(
        self,
        h_dim: int,
        edge_dim: int = 0,
        *,
        hidden: int | None = None,
        act: str = "silu",
        update_coords: bool = True,
        residual: bool = True,
        coord_agg: str = "mean",
        normalize: bool = False,
    ) -> None:
        super().__init__()
        self.h_dim = _check_positive_int(h_dim, "h_dim")
        self.edge_dim = _check_positive_int(edge_dim, "edge_dim", allow_zero=True)
        hidden = h_dim if hidden is None else _check_positive_int(hidden, "hidden")
        activation(act)
        self.coord_agg = check_choice(coord_agg, ("mean", "sum"), "coord_agg")
        self.update_coords, self.residual, self.normalize = update_coords, residual, normalize
        self.phi_e = nn.Sequential(
            nn.Linear(2 * h_dim + 1 + edge_dim, hidden),
            activation(act),
            nn.Linear(hidden, hidden),
            activation(act),
        )
        self.phi_h = nn.Sequential(nn.Linear(h_dim + hidden, hidden), activation(act), nn.Linear(hidden, h_dim))
        if update_coords:
            last = nn.Linear(hidden, 1, bias=False)
            nn.init.xavier_uniform_(last.weight, gain=1e-3)  # small initial coordinate steps
            self.phi_x = nn.Sequential(nn.Linear(hidden, hidden), activation(act), last)

    def forward(
        self,
        h: torch.Tensor,
        x: torch.Tensor,
        edge_index: torch.Tensor,
        edge_attr: torch.Tensor | None = None,
    ) -> EGNNOutput:
        """h: (N, h_dim), x: (N, n), edge_index: (2, E), edge_attr: (E, edge_dim) or None -> the updated
        `EGNNOutput(h, x)` (x is unchanged when `update_coords=False`)."""
        check_tensor(h, "h", min_dim=2, finite=False)
        check_tensor(x, "x", min_dim=2, finite=False)
        if h.dim() != 2 or h.shape[1] != self.h_dim:
            raise ValueError(f"h: expected shape (N, {self.h_dim}), got {tuple(h.shape)}")
        if x.dim() != 2 or x.shape[0] != h.shape[0]:
            raise ValueError(f"x: expected shape ({h.shape[0]}, n) matching h, got {tuple(x.shape)}")
        if not isinstance(edge_index, torch.Tensor) or edge_index.dim() != 2 or edge_index.shape[0] != 2:
            shape = tuple(edge_index.shape) if isinstance(edge_index, torch.Tensor) else type(edge_index).__name__
            raise ValueError(f"edge_index: expected shape (2, E), got {shape}")
        if edge_index.dtype != torch.long:
            raise ValueError(f"edge_index: expected dtype torch.long, got {edge_index.dtype}")
        n_edges = edge_index.shape[1]
        if self.edge_dim:
            if not isinstance(edge_attr, torch.Tensor) or tuple(edge_attr.shape) != (n_edges, self.edge_dim):
                shape = tuple(edge_attr.shape) if isinstance(edge_attr, torch.Tensor) else type(edge_attr).__name__
                raise ValueError(f"edge_attr: expected shape ({n_edges}, {self.edge_dim}), got {shape}")
        elif edge_attr is not None:
            raise ValueError("edge_attr: given to a layer built with edge_dim=0")

        src, dst = edge_index[0], edge_index[1]
        diff = x[dst] - x[src]  # (E, n): x_i - x_j
        dist2 = diff.pow(2).sum(-1, keepdim=True)
        parts = [h[dst], h[src], dist2.to(h.dtype)]
        if self.edge_dim:
            parts.append(edge_attr.to(h.dtype))
        m = self.phi_e(torch.cat(parts, dim=-1))  # (E, hidden)
        m_sum = m.new_zeros(h.shape[0], m.shape[1]).index_add_(0, dst, m)
        update = self.phi_h(torch.cat([h, m_sum], dim=-1))
        h_new = h + update if self.residual else update

        x_new = x
        if self.update_coords:
            if self.normalize:
                diff = diff / (dist2.sqrt() + 1.0)
            step = diff * self.phi_x(m).to(x.dtype)
            total = x.new_zeros(x.shape).index_add_(0, dst, step)
            if self.coord_agg == "mean":
                degree = torch.bincount(dst, minlength=x.shape[0]).clamp_min(1).to(x.dtype)
                total = total / degree[:, None]
            x_new = x + total
        return EGNNOutput(h=h_new, x=x_new)
