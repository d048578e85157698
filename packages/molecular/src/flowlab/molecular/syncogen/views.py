"""The two token views of the mini SynSpace that the joint network trains on.

- `block_view`: SynCoGen's graph: building blocks as nodes (K = 16 atom slots), reactions with centres as pairs.
- `atom_view`: the atom-level baseline's graph: atoms as nodes (K = 1), bond orders as pairs, no synthesis graph.

Both give a `GraphData` with `nodes: (M, N)`, `edges: (M, P)`, `coords: (M, C, N, K, 3)` (C conformers; slots that
hold no product atom sit at their node's centroid, empty nodes at 0), `target: (M, N, K)` the product's atoms, and
`bonds: (M, B, 2)` product bonds as flat atom indices node * K + slot (-1 padded); and the network's `TokenTables`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from flowlab.molecular.syncogen.assemble import pair_index
from flowlab.molecular.syncogen.model import TokenTables
from flowlab.molecular.syncogen.space import ELEMENTS, SynSpace
from flowlab.molecular.syncogen.vocabulary import Vocabulary

__all__ = ["GraphData", "atom_tables", "atom_view", "block_tables", "block_view"]

#: pair tokens of the atom-level view: none, single, double, triple, aromatic
BOND_TOKENS = 5


@dataclass(frozen=True)
class GraphData:
    """The tensors of the module docstring."""

    nodes: torch.Tensor
    edges: torch.Tensor
    coords: torch.Tensor
    target: torch.Tensor
    bonds: torch.Tensor

    def __len__(self) -> int:
        return self.nodes.shape[0]

    def batch(self, index: torch.Tensor, conformer: torch.Tensor) -> dict[str, torch.Tensor]:
        """index, conformer: (B,) -> the training batch dict (nodes, edges, x1: (B, N, K, 3), target, bonds)."""
        return {"nodes": self.nodes[index], "edges": self.edges[index], "x1": self.coords[index, conformer],
                "target": self.target[index], "bonds": self.bonds[index]}  # fmt: skip


def _fill_centroids(coords: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """coords: (M, C, N, K, 3), target: (M, N, K) -> coords with non-target slots at their node's centroid."""
    w = target[:, None, :, :, None].to(coords.dtype)
    centroid = (coords * w).sum(3, keepdim=True) / w.sum(3, keepdim=True).clamp_min(1)
    return torch.where(w.bool(), coords, centroid.expand_as(coords))


def block_tables(vocab: Vocabulary) -> TokenTables:
    """SynCoGen's tables: V blocks + "no node" (id V), mask id V + 1; edge tokens of `vocab.codec`."""
    v, a = vocab.n_blocks, vocab.max_atoms
    count = torch.zeros(v + 2, dtype=torch.long)
    count[:v] = torch.as_tensor(vocab.atoms_per_block)
    count[v + 1] = a
    centre = torch.full((v + 2, vocab.n_centres), -1, dtype=torch.long)
    for b, cs in enumerate(vocab.centres):
        centre[b, : len(cs)] = torch.tensor(cs)
    table = torch.as_tensor(vocab.codec.table())
    edge_centres = torch.cat([table[:, 2:], torch.full((1, 2), -1, dtype=torch.long)])  # + mask id
    return TokenTables(count, centre, edge_centres)


def block_view(space: SynSpace) -> GraphData:
    """SynCoGen's view of `space` (nodes: block ids, V = no node)."""
    return GraphData(space.blocks, space.edges, _fill_centroids(space.coords, space.slot_mask), space.slot_mask,
                     space.bonds)  # fmt: skip


def atom_tables(n_atoms: int) -> TokenTables:
    """The atom-level baseline's tables: len(ELEMENTS) elements + "no atom", one slot each, no centres."""
    v = len(ELEMENTS) + 1
    count = torch.ones(v + 1, dtype=torch.long)
    count[v - 1] = 0
    return TokenTables(count, torch.full((v + 1, 1), -1, dtype=torch.long),
                       torch.full((BOND_TOKENS + 1, 2), -1, dtype=torch.long))  # fmt: skip


def atom_view(space: SynSpace) -> GraphData:
    """The atom-level view of `space`: atoms as nodes (no atom = len(ELEMENTS)), bond orders as pairs."""
    m, length = space.elements.shape
    present = space.elements >= 0
    nodes = torch.where(present, space.elements, len(ELEMENTS))
    i, j = torch.tensor(pair_index(length), dtype=torch.long).reshape(-1, 2).unbind(1)
    edges = space.bond_orders[:, i, j].long()
    slots = space.atom_slots.clamp_min(0)
    flat = space.coords.flatten(2, 3)  # (M, C, N * A, 3)
    coords = flat.gather(2, slots[:, None, :, None].expand(-1, flat.shape[1], -1, 3))
    coords = (coords * present[:, None, :, None]).unsqueeze(3)
    pairs = (space.bond_orders > 0).triu(1).nonzero()
    counts = torch.bincount(pairs[:, 0], minlength=m)
    bonds = torch.full((m, int(counts.max()), 2), -1, dtype=torch.long)
    rank = torch.arange(len(pairs)) - torch.cumsum(counts, 0).roll(1).index_fill(0, torch.tensor([0]), 0)[pairs[:, 0]]
    bonds[pairs[:, 0], rank] = pairs[:, 1:]
    return GraphData(nodes, edges, coords, present[..., None], bonds)
