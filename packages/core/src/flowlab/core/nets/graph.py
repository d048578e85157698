"""Radius and k-nearest-neighbour graphs in pure torch, returned as PyG-layout edge lists.

`edge_index: (2, E)` long with row 0 the source (neighbour) j and row 1 the target (centre) i, PyG's
"source_to_target" flow, so messages x_j -> x_i aggregate at `edge_index[1]`. Edges are sorted by target, then
source. Graphs in a batch (`batch: (N,)` graph ids, sorted or not) never connect to each other. Distances
are computed exactly (no |a|^2 + |b|^2 - 2ab cancellation), in float64 for float64 points and float32
otherwise. Two searches are available:

- dense: all pairs of each graph, on padded per-graph blocks of at most `block_pairs` pairs, so memory stays
  bounded for large N but time is quadratic in the nodes of a graph;
- grid (radius graphs of 1-3-D points): a cell list. Nodes are binned into cells of side about r and sorted
  by (graph, cell) key; each node's candidates are the nodes of its own and adjacent cells, found with
  `searchsorted`, so time is O(N log N + candidates), about linear in N at a fixed density.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

import torch

from flowlab.core.validation import check_choice, check_tensor

__all__ = ["knn_graph", "radius", "radius_graph"]

_BLOCK_PAIRS = 1 << 22
_METHODS = ("auto", "grid", "dense")
_GRID_DIMS = (1, 2, 3)
_GRID_MIN_NODES = 1024  # "auto" uses the grid above this many nodes: where it wins on CPU at ~30 neighbours
# cells are a little wider than r, so a pair within r (after float rounding) is never two cells apart
_CELL_SLACK = 1.0 + 1e-3
_INT64_MAX = (1 << 63) - 1


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


def _distance_dtype(pos: torch.Tensor) -> torch.dtype:
    return pos.dtype if pos.dtype in (torch.float32, torch.float64) else torch.float32


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
    dtype = _distance_dtype(pos)
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


def _dense_radius(
    pos: torch.Tensor, batch: torch.Tensor, r: float, max_num_neighbors: int | None, loop: bool, block_pairs: int
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Sources and targets of the radius graph from all pairs of each graph."""
    sources, targets = [], []
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
    return sources, targets


def _cell_keys(pos: torch.Tensor, batch: torch.Tensor, r: float) -> tuple[torch.Tensor, list[int]] | None:
    """Each node's int64 (graph, cell) key: (N,), and the grid's cells per dimension, or None on int64 overflow.

    Cell coordinates start at 1 and each extent is padded by one cell on both sides, so keys of adjacent
    cells never wrap into another row or graph.
    """
    ids, graph = torch.unique(batch, return_inverse=True)
    scaled = (pos.double() - pos.double().amin(0)) / (r * _CELL_SLACK)
    top = scaled.amax(0).tolist()
    if not all(map(math.isfinite, top)):
        return None
    extents = [math.floor(t) + 3 for t in top]
    if ids.numel() * math.prod(extents) > _INT64_MAX:
        return None
    cells = scaled.floor().long() + 1
    key = graph
    for d, extent in enumerate(extents):
        key = key * extent + cells[:, d]
    return key, extents


def _neighbour_ranges(key: torch.Tensor, extents: list[int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Sort nodes by key; return the order (N,), and per sorted node and per row of 3 adjacent cells
    (3^(D-1) rows, consecutive in the last dimension), the first sorted position and node count: (N, 3^(D-1)).
    """
    sorted_key, order = torch.sort(key, stable=True)
    return order, *_query_ranges(sorted_key, sorted_key, extents)


def _query_ranges(
    sorted_key: torch.Tensor, query_key: torch.Tensor, extents: list[int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per query key (Q,) and per row of 3 adjacent cells (3^(D-1) rows), the first position in `sorted_key` and
    the number of points there: (Q, 3^(D-1)) each."""
    strides = [math.prod(extents[d + 1 :]) for d in range(len(extents))]
    shifts = itertools.product((-1, 0, 1), repeat=len(extents) - 1)
    deltas = torch.tensor([sum(o * stride for o, stride in zip(shift, strides)) for shift in shifts],
                          device=query_key.device)  # fmt: skip
    centre = query_key[:, None] + deltas
    start = torch.searchsorted(sorted_key, centre - 1)
    return start, torch.searchsorted(sorted_key, centre + 1, right=True) - start


def _candidates(
    start: torch.Tensor, count: torch.Tensor, block_pairs: int
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Yield candidate pairs (target, source) as sorted positions, chunked over targets at about
    `block_pairs` candidates (more only when one target alone has more), all of a target's in one chunk."""
    rows = count.shape[1]
    per_target = count.sum(1)
    chunk = (torch.cumsum(per_target, 0) - per_target) // block_pairs
    t0 = 0
    for n in torch.unique_consecutive(chunk, return_counts=True)[1].tolist():
        c, s = count[t0 : t0 + n].flatten(), start[t0 : t0 + n].flatten()
        first = torch.cumsum(c, 0) - c
        entry = torch.repeat_interleave(torch.arange(c.numel(), device=c.device), c)
        target = t0 + torch.div(entry, rows, rounding_mode="floor")
        yield target, s[entry] + torch.arange(entry.numel(), device=c.device) - first[entry]
        t0 += n


def _nearest_within(
    target: torch.Tensor, source: torch.Tensor, dist: torch.Tensor, k: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Keep each target's k nearest sources (ties to the lower source id): (target, source), both (E',)."""
    order = torch.argsort(source, stable=True)
    order = order[torch.argsort(dist[order], stable=True)]
    order = order[torch.argsort(target[order], stable=True)]
    grouped = target[order]
    rank = torch.arange(grouped.numel(), device=grouped.device) - torch.searchsorted(grouped, grouped)
    keep = order[rank < k]
    return target[keep], source[keep]


def _grid_radius(
    pos: torch.Tensor,
    grid: tuple[torch.Tensor, list[int]],
    r: float,
    max_num_neighbors: int | None,
    loop: bool,
    block_pairs: int,
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Sources and targets of the radius graph from the nodes of adjacent cells (`grid` from `_cell_keys`)."""
    order, start, count = _neighbour_ranges(*grid)
    sorted_pos = pos.to(_distance_dtype(pos))[order]
    sources, targets = [], []
    for target, source in _candidates(start, count, block_pairs):
        dist = (sorted_pos[target] - sorted_pos[source]).norm(dim=-1)
        keep = dist <= r if loop else (dist <= r) & (target != source)
        target, source, dist = order[target[keep]], order[source[keep]], dist[keep]
        if max_num_neighbors is not None:
            target, source = _nearest_within(target, source, dist, max_num_neighbors)
        sources.append(source)
        targets.append(target)
    return sources, targets


def _grid_or_none(
    pos: torch.Tensor, batch: torch.Tensor, r: float, method: str
) -> tuple[torch.Tensor, list[int]] | None:
    """The cell keys when the grid search applies (`_cell_keys`), None for the dense search."""
    check_choice(method, _METHODS, "method")
    low_dim = pos.shape[1] in _GRID_DIMS
    if method == "grid" and not low_dim:
        raise ValueError(f"method: 'grid' needs points of dimension 1 to 3, got D = {pos.shape[1]}")
    if not pos.shape[0] or method == "dense" or (method == "auto" and not (low_dim and pos.shape[0] > _GRID_MIN_NODES)):
        return None
    grid = _cell_keys(pos, batch, r)
    if grid is None and method == "grid":
        raise ValueError(
            "method: 'grid' needs the (graph, cell) keys to fit int64, but the points span too many cells of "
            f"side r = {r!r}; use method='dense' or 'auto'"
        )
    return grid


@torch.no_grad()
def radius(
    x: torch.Tensor,
    y: torch.Tensor,
    r: float,
    *,
    batch_x: torch.Tensor | None = None,
    batch_y: torch.Tensor | None = None,
    block_pairs: int = _BLOCK_PAIRS,
) -> torch.Tensor:
    """For each query y_i, the points x_j of the same graph with |x_j - y_i| <= r (PyG's `radius`).

    x: (N, D) points, y: (Q, D) queries (1 <= D <= 3), batch_x: (N,), batch_y: (Q,) graph ids -> (2, E) long, row 0
    the query i, row 1 the point j, sorted by query then point. A cell list over both sets (cells of side about r):
    time about linear in N + Q at a fixed density, e.g. pedestrians (queries) against a scene's static cells.
    """
    batch_x = _check_inputs(x, batch_x, block_pairs)
    batch_y = _check_inputs(y, batch_y, block_pairs)
    if x.shape[1] != y.shape[1] or x.shape[1] not in _GRID_DIMS:
        raise ValueError(f"x, y: expected points of one dimension D in 1..3, got {x.shape[1]} and {y.shape[1]}")
    if not (isinstance(r, (int, float)) and math.isfinite(r) and r > 0):
        raise ValueError(f"r: expected a finite positive radius, got {r!r}")
    n = x.shape[0]
    if not n or not y.shape[0]:
        return torch.empty(2, 0, dtype=torch.long, device=x.device)
    grid = _cell_keys(torch.cat([x, y.to(x.dtype)]), torch.cat([batch_x, batch_y]), r)
    if grid is None:
        raise ValueError(f"x, y: the points span too many cells of side r = {r!r} for int64 cell keys")
    key, extents = grid
    sorted_key, order = torch.sort(key[:n], stable=True)
    start, count = _query_ranges(sorted_key, key[n:], extents)
    dtype = _distance_dtype(x)
    sorted_x, queries = x.to(dtype)[order], y.to(dtype)
    sources, targets = [], []
    for query, point in _candidates(start, count, block_pairs):
        keep = (queries[query] - sorted_x[point]).norm(dim=-1) <= r
        targets.append(query[keep])
        sources.append(order[point[keep]])
    return _edge_index(sources, targets, max(n, y.shape[0]), x.device).flip(0)


@torch.no_grad()
def radius_graph(
    pos: torch.Tensor,
    r: float,
    *,
    batch: torch.Tensor | None = None,
    max_num_neighbors: int | None = None,
    loop: bool = False,
    block_pairs: int = _BLOCK_PAIRS,
    method: str = "auto",
) -> torch.Tensor:
    """Edges j -> i for every pair in the same graph with |pos_i - pos_j| <= r.

    pos: (N, D), batch: (N,) graph ids -> edge_index: (2, E) long. `max_num_neighbors` keeps, for each
    target, only its nearest `max_num_neighbors` sources within r (self-loops, when `loop=True`, count among
    them); ties at the cap go to an arbitrary source with "dense", to the lowest source id with "grid". PyG's
    builder keeps an arbitrary subset instead of the nearest ones and defaults to 32; here None means no cap.

    `method`: "dense" checks all pairs of each graph, O(sum of n_graph^2) time, blocks of `block_pairs`
    pairs. "grid" (1 <= D <= 3) searches a cell list, O(N log N + candidates) time, where candidates are
    the pairs in adjacent cells of side ~r (about N * density * (3r)^D), chunked at about `block_pairs`
    candidates; it raises ValueError when the points span more cells than int64 keys can number. "auto"
    uses the grid for 1 <= D <= 3 and more than 1024 nodes when the keys fit, else dense. Both give the
    same edges.
    """
    batch = _check_inputs(pos, batch, block_pairs)
    if not (isinstance(r, (int, float)) and math.isfinite(r) and r > 0):
        raise ValueError(f"r: expected a finite positive radius, got {r!r}")
    if max_num_neighbors is not None and (not isinstance(max_num_neighbors, int) or max_num_neighbors < 1):
        raise ValueError(f"max_num_neighbors: expected None or a positive integer, got {max_num_neighbors!r}")
    grid = _grid_or_none(pos, batch, r, method)
    if grid is not None:
        sources, targets = _grid_radius(pos, grid, r, max_num_neighbors, loop, block_pairs)
    elif pos.shape[0]:
        sources, targets = _dense_radius(pos, batch, r, max_num_neighbors, loop, block_pairs)
    else:
        sources, targets = [], []
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
