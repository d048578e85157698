"""Radius and k-nearest-neighbour graphs in pure torch, returned as PyG-layout edge lists.

`edge_index: (2, E)` long with row 0 the source (neighbour) j and row 1 the target (centre) i, PyG's
"source_to_target" flow, so messages x_j -> x_i aggregate at `edge_index[1]`. Edges are sorted by target, then
source. Graphs in a batch (`batch: (N,)` graph ids, sorted or not) never connect to each other. Distances
are computed exactly (no |a|^2 + |b|^2 - 2ab cancellation) on padded per-graph blocks of at most
`block_pairs` pairs, so memory stays bounded for large N.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch

from flowlab.core.validation import check_tensor

__all__ = ["knn_graph", "radius_graph"]

_BLOCK_PAIRS = 1 << 22


def _check_inputs(pos: torch.Tensor, batch: torch.Tensor | None, block_pairs: int) -> torch.Tensor:
    check_tensor(pos, "pos", min_dim=2)
    if pos.dim() != 2 or not pos.is_floating_point():
        raise ValueError(f"pos: expected a floating tensor of shape (N, D), got {pos.dtype} {tuple(pos.shape)}")
    if batch is None:
        batch = torch.zeros(pos.shape[0], dtype=torch.long, device=pos.device)
    if not isinstance(batch, torch.Tensor) or tuple(batch.shape) != (pos.shape[0],):
        shape = tuple(batch.shape) if isinstance(batch, torch.Tensor) else type(batch).__name__
        raise ValueError(f"batch: expected shape ({pos.shape[0]},) (one graph id per node), got {shape}")
    if batch.is_floating_point() or batch.is_complex() or batch.dtype == torch.bool:
        raise ValueError(f"batch: expected an integer tensor of graph ids, got {batch.dtype}")
    if not isinstance(block_pairs, int) or block_pairs < 1:
        raise ValueError(f"block_pairs: expected a positive integer, got {block_pairs!r}")
    return batch.to(pos.device)


def _blocks(
    pos: torch.Tensor, batch: torch.Tensor, *, loop: bool, block_pairs: int
) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Yield (targets (g, rows), sources (g, M), dist (g, rows, M)) over padded per-graph blocks.

    Node ids are original indices (-1 for padding); dist is inf for padding, other graphs and (without loop)
    the node itself.
    """
    _, graph = torch.unique(batch, return_inverse=True)
    order = torch.argsort(graph, stable=True)
    counts = torch.bincount(graph)
    n_graphs, width = counts.numel(), int(counts.max())
    start = torch.cumsum(counts, 0) - counts
    sorted_graph = graph[order]
    slot = sorted_graph * width + torch.arange(pos.shape[0], device=pos.device) - start[sorted_graph]
    dtype = pos.dtype if pos.dtype in (torch.float32, torch.float64) else torch.float32
    dense = pos.new_zeros(n_graphs * width, pos.shape[1], dtype=dtype)
    dense[slot] = pos[order].to(dtype)
    ids = torch.full((n_graphs * width,), -1, dtype=torch.long, device=pos.device)
    ids[slot] = order
    dense, ids = dense.reshape(n_graphs, width, -1), ids.reshape(n_graphs, width)

    rows = max(1, min(width, block_pairs // width))
    graphs = max(1, block_pairs // (rows * width))
    local = torch.arange(width, device=pos.device)
    for g0 in range(0, n_graphs, graphs):
        src_ids = ids[g0 : g0 + graphs]
        for r0 in range(0, width, rows):
            tgt_ids = src_ids[:, r0 : r0 + rows]
            dist = torch.cdist(
                dense[g0 : g0 + graphs, r0 : r0 + rows],
                dense[g0 : g0 + graphs],
                compute_mode="donot_use_mm_for_euclid_dist",
            )
            invalid = (tgt_ids < 0)[:, :, None] | (src_ids < 0)[:, None, :]
            if not loop:
                invalid = invalid | (local[r0 : r0 + rows, None] == local[None, :])
            yield tgt_ids, src_ids, dist.masked_fill(invalid, math.inf)


def _edge_index(sources: list[torch.Tensor], targets: list[torch.Tensor], n: int, device) -> torch.Tensor:
    if not sources:
        return torch.empty(2, 0, dtype=torch.long, device=device)
    src, dst = torch.cat(sources), torch.cat(targets)
    order = torch.argsort(dst * n + src)
    return torch.stack([src[order], dst[order]])


def _nearest(
    dist: torch.Tensor, src_ids: torch.Tensor, tgt_ids: torch.Tensor, k: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The k nearest sources of each target in a block: (values, source ids, target ids), all (g, rows, k)."""
    k = min(k, dist.shape[-1])
    values, index = dist.topk(k, dim=-1, largest=False, sorted=False)
    source = torch.gather(src_ids[:, None, :].expand(-1, dist.shape[1], -1), 2, index)
    return values, source, tgt_ids[:, :, None].expand_as(source)


@torch.no_grad()
def radius_graph(
    pos: torch.Tensor,
    r: float,
    *,
    batch: torch.Tensor | None = None,
    max_num_neighbors: int | None = None,
    loop: bool = False,
    block_pairs: int = _BLOCK_PAIRS,
) -> torch.Tensor:
    """Edges j -> i for every pair in the same graph with |pos_i - pos_j| <= r.

    pos: (N, D), batch: (N,) graph ids -> edge_index: (2, E) long. `max_num_neighbors` keeps, for each
    target, only its nearest `max_num_neighbors` sources within r (self-loops, when `loop=True`, count among
    them). PyG's builder keeps an arbitrary subset instead of the nearest ones and defaults to 32; here None
    means no cap.
    """
    batch = _check_inputs(pos, batch, block_pairs)
    if not (isinstance(r, (int, float)) and math.isfinite(r) and r > 0):
        raise ValueError(f"r: expected a finite positive radius, got {r!r}")
    if max_num_neighbors is not None and (not isinstance(max_num_neighbors, int) or max_num_neighbors < 1):
        raise ValueError(f"max_num_neighbors: expected None or a positive integer, got {max_num_neighbors!r}")
    sources, targets = [], []
    if pos.shape[0]:
        for tgt_ids, src_ids, dist in _blocks(pos, batch, loop=loop, block_pairs=block_pairs):
            if max_num_neighbors is None:
                g, row, col = torch.nonzero(dist <= r, as_tuple=True)
                sources.append(src_ids[g, col])
                targets.append(tgt_ids[g, row])
            else:
                values, source, target = _nearest(dist, src_ids, tgt_ids, max_num_neighbors)
                keep = values <= r
                sources.append(source[keep])
                targets.append(target[keep])
    return _edge_index(sources, targets, pos.shape[0], pos.device)


@torch.no_grad()
def knn_graph(
    pos: torch.Tensor,
    k: int,
    *,
    batch: torch.Tensor | None = None,
    loop: bool = False,
    block_pairs: int = _BLOCK_PAIRS,
) -> torch.Tensor:
    """Edges j -> i from each node's k nearest nodes j of the same graph (fewer when the graph is smaller).

    pos: (N, D), batch: (N,) graph ids -> edge_index: (2, E) long. With `loop=True` a node counts as its own
    nearest neighbour (distance 0), as in PyG. Ties at the k-th distance are broken arbitrarily.
    """
    batch = _check_inputs(pos, batch, block_pairs)
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f"k: expected a positive integer, got {k!r}")
    sources, targets = [], []
    if pos.shape[0]:
        for tgt_ids, src_ids, dist in _blocks(pos, batch, loop=loop, block_pairs=block_pairs):
            values, source, target = _nearest(dist, src_ids, tgt_ids, k)
            keep = torch.isfinite(values)
            sources.append(source[keep])
            targets.append(target[keep])
    return _edge_index(sources, targets, pos.shape[0], pos.device)
