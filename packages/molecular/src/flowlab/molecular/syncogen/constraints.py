"""Sampling-time chemistry constraints on block graphs, as the allowed-token masks `ctmc_step` takes.

Given the current tokens (nodes: (B, N) with "no node" = V and mask = V + 1; edges: (B, P) with mask = E), a node may
take only the blocks compatible with every decided edge at it (`compatibility[r, role, b, c]`), and "no node" only
when no decided edge touches it; a pair may take a reaction only when (1) both its nodes can still be blocks
compatible with it, (2) neither centre is already used by another decided edge, and (3) the two nodes are not
already connected (tree: no cycle, so at most n - 1 edges). Connectivity: a pair may stay empty, and a node may
become "no node", only while the remaining nodes can still be joined by decided or still-masked pairs, so a
finished graph is one tree. Self-loops cannot be written: pairs are i < j only. With `compatibility=False` (the
ablation) only the tree and connectivity rules and "an edge needs two blocks" remain.

Order: within a step the pairs are decided first, one at a time (`edge_allowed` is recomputed after each), and a
node is revealed only once all its pairs are decided, to a block that fits all of them. A pair takes a reaction
only when each of its nodes can still take a block that fits it and every pair decided before, so a node always
has a block left: a graph sampled under the masks has no violation (`violations` counts them).
"""

from __future__ import annotations

import numpy as np
import torch

from flowlab.molecular.syncogen.assemble import pair_index
from flowlab.molecular.syncogen.vocabulary import Vocabulary

__all__ = ["GraphConstraints", "violations"]


class GraphConstraints:
    """The masks of the module docstring for graphs of `n_nodes` nodes over `vocab`."""

    def __init__(self, vocab: Vocabulary, n_nodes: int, *, compatibility: bool = True) -> None:
        v, codec = vocab.n_blocks, vocab.codec
        self.n_block, self.n_edge, self.compat = v, codec.size, compatibility
        table = codec.table()
        comp = vocab.compatibility
        req = np.ones((codec.size, 2, v + 1), dtype=bool)  # edge token, side (node i / node j), node token
        for e in range(1, codec.size):
            r, o, c_i, c_j = table[e]
            req[e, :, v] = False
            if compatibility:
                req[e, 0, :v] = comp[r, o, :, c_i]
                req[e, 1, :v] = comp[r, 1 - o, :, c_j]
        self.req = torch.as_tensor(req)
        self.centre = torch.as_tensor(table[:, 2:]).clamp_min(0)  # (E, 2) centres c_i, c_j
        self.pairs = pair_index(n_nodes)
        self.n_nodes, self.n_centres = n_nodes, vocab.n_centres

    def _decided(self, edges: torch.Tensor) -> torch.Tensor:
        return edges != self.n_edge

    def _closure(self, link: torch.Tensor) -> torch.Tensor:
        """link: (B, N, N) bool adjacency (diagonal set) -> reachability."""
        for _ in range(max(self.n_nodes - 1, 1).bit_length()):
            link = link | ((link.float() @ link.float()) > 0)
        return link

    def _joinable(self, nodes: torch.Tensor, edges: torch.Tensor, pair: int = -1, node: int = -1) -> torch.Tensor:
        """(B,): the nodes that are or may become blocks (all but `node`) can still form one connected graph
        through decided and still-masked pairs (pair `pair` left out)."""
        b, n = nodes.shape
        alive = nodes != self.n_block
        if node >= 0:
            alive = alive.clone()
            alive[:, node] = False
        link = torch.eye(n, dtype=torch.bool, device=nodes.device).expand(b, -1, -1).clone()
        for p, (i, j) in enumerate(self.pairs):
            if p != pair:
                on = (edges[:, p] > 0) & alive[:, i] & alive[:, j]
                link[:, i, j] |= on
                link[:, j, i] |= on
        reach = self._closure(link)
        first = alive.float().argmax(1)  # one alive node (any)
        seen = reach[torch.arange(b, device=nodes.device), first]  # (B, N)
        return ~(alive & ~seen).any(1)

    def node_allowed(self, nodes: torch.Tensor, edges: torch.Tensor, *, gate: bool = True) -> torch.Tensor:
        """nodes: (B, N), edges: (B, P) -> (B, N, V + 1) bool, the node tokens each node may take (with `gate`,
        none while one of its pairs is still masked)."""
        req = self.req.to(nodes.device)
        allowed = torch.ones(*nodes.shape, self.n_block + 1, dtype=torch.bool, device=nodes.device)
        for p, (i, j) in enumerate(self.pairs):
            e = torch.where(self._decided(edges[:, p]), edges[:, p], 0)
            allowed[:, i] &= req[e, 0]
            allowed[:, j] &= req[e, 1]
        for k in range(self.n_nodes):
            allowed[:, k, self.n_block] &= self._joinable(nodes, edges, node=k)
        if gate:
            for p, (i, j) in enumerate(self.pairs):
                waiting = ~self._decided(edges[:, p])
                allowed[:, i] &= ~waiting[:, None]
                allowed[:, j] &= ~waiting[:, None]
        return allowed

    def edge_allowed(self, nodes: torch.Tensor, edges: torch.Tensor) -> torch.Tensor:
        """nodes: (B, N), edges: (B, P) -> (B, P, E) bool, the pair tokens each pair may take."""
        device, b = nodes.device, nodes.shape[0]
        req, centre = self.req.to(device), self.centre.to(device)
        node_ok = self.node_allowed(nodes, edges, gate=False).float()  # (B, N, V + 1)
        masked = nodes > self.n_block
        decided = self._decided(edges) & (edges > 0)
        used = torch.zeros(b, self.n_nodes, self.n_centres + 1, dtype=torch.bool, device=device)
        link = torch.eye(self.n_nodes, dtype=torch.bool, device=device).expand(b, -1, -1).clone()
        for p, (i, j) in enumerate(self.pairs):
            e = edges[:, p].clamp(max=self.n_edge - 1)
            used[:, i].scatter_(1, torch.where(decided[:, p], centre[e, 0], self.n_centres)[:, None], True)
            used[:, j].scatter_(1, torch.where(decided[:, p], centre[e, 1], self.n_centres)[:, None], True)
            link[:, i, j] |= decided[:, p]
            link[:, j, i] |= decided[:, p]
        link = self._closure(link)  # who is already connected to whom
        allowed = torch.ones(b, len(self.pairs), self.n_edge, dtype=torch.bool, device=device)
        for p, (i, j) in enumerate(self.pairs):
            for side, node in ((0, i), (1, j)):
                fixed = req[:, side, :].T[nodes[:, node].clamp(max=self.n_block)]  # (B, E) if the node is decided
                possible = (node_ok[:, node] @ req[:, side, :].T.float()) > 0  # some allowed block fits
                allowed[:, p] &= torch.where(masked[:, node, None], possible, fixed)
                if self.compat:
                    allowed[:, p] &= ~used[:, node].gather(1, centre[:, side].expand(b, -1))
            allowed[:, p, 1:] &= ~link[:, i, j, None]
            allowed[:, p, 0] = self._joinable(nodes, edges, pair=p) | ~allowed[:, p, 1:].any(-1)
        return allowed


def violations(vocab: Vocabulary, nodes: torch.Tensor, edges: torch.Tensor) -> torch.Tensor:
    """nodes: (B, N), edges: (B, P) decided tokens -> (B,) number of broken rules per graph: an edge at an empty
    node, an incompatible block at a reaction centre, a centre used twice, more than n - 1 edges or a cycle."""
    codec, comp, v = vocab.codec, vocab.compatibility, vocab.n_blocks
    out = torch.zeros(nodes.shape[0], dtype=torch.long)
    pairs = pair_index(nodes.shape[1])
    for g, (ns, es) in enumerate(zip(nodes.tolist(), edges.tolist(), strict=True)):
        parent = list(range(len(ns)))

        def find(a: int, parent: list[int] = parent) -> int:
            while parent[a] != a:
                a = parent[a]
            return a

        used, bad = set(), 0
        for (i, j), e in zip(pairs, es, strict=True):
            if e == 0 or e >= codec.size:
                continue
            r, o, c_i, c_j = codec.decode(e)
            for node, c, role in ((i, c_i, o), (j, c_j, 1 - o)):
                if ns[node] >= v or not comp[r, role, ns[node], c] or (node, c) in used:
                    bad += 1
                used.add((node, c))
            if find(i) == find(j):
                bad += 1
            parent[find(i)] = find(j)
        out[g] = bad
    return out
