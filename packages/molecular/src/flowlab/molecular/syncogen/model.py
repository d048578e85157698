"""The joint network: node tokens, pair (edge) tokens and per-node atom coordinates in, posteriors over clean
node and edge tokens and the clean coordinates out (data prediction), on core EGNN layers.

A graph has N nodes, each with K atom slots, and P = N(N-1)/2 pair tokens (i < j). SynCoGen's nodes are building
blocks (K = 16 slots) and its pairs reactions with centres; the atom-level baseline's nodes are atoms (K = 1) and its
pairs bond orders: both are this network with other tables (`TokenTables`). Node token ids run over the `n_node`
values (the last one meaning "no node"), then the mask id `n_node`; edge ids likewise with mask id `n_edge`.

Every atom of a visible node (its first `atom_count[token]` slots; all K slots of a masked node, none of an empty
one) is a point of a fully connected EGNN graph. Atom features: an embedding of (node token, slot), the time, the
self-conditioned node posterior, and an "anchor" flag on atoms that are the centre of a decided edge. Edge features:
an embedding of the pair's token (or "same node"), the self-conditioned pair posterior and an RBF of the
self-conditioned distance. Predicted coordinates are clipped to +-`BOX` Å.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from flowlab.core.config import Config
from flowlab.core.geometry import mean_free
from flowlab.core.nets import EGNNLayer, SinusoidalEmbedding
from flowlab.molecular.syncogen.assemble import pair_index

__all__ = ["BOX", "JointNet", "JointOutput", "NetConfig", "SelfCondition", "TokenTables"]

#: predicted coordinates are clipped to [-BOX, BOX] Å (a molecule here spans < 25 Å): an untrained or undertrained
#: network fed its own self-conditioned output can otherwise grow coordinates without bound while sampling
BOX = 30.0


@dataclass(frozen=True)
class NetConfig(Config):
    """`n_node`, `n_edge` token values (mask excluded), `n_nodes` N, `slots` K, width `dim`, EGNN `layers`, and
    whether the network takes its own previous prediction (`self_condition`)."""

    n_node: int
    n_edge: int
    n_nodes: int
    slots: int
    dim: int = 64
    layers: int = 3
    self_condition: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("n_node", "n_edge", "n_nodes", "slots", "dim", "layers"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: expected a positive integer, got {getattr(self, name)}")


@dataclass(frozen=True)
class TokenTables:
    """`atom_count: (n_node + 1,)` visible slots per node token (mask id last), `centre_slot: (n_node + 1, C)` the
    slot of each centre (-1 none), `edge_centres: (n_edge + 1, 2)` the centres (c_i, c_j) an edge token uses
    (-1 none)."""

    atom_count: torch.Tensor
    centre_slot: torch.Tensor
    edge_centres: torch.Tensor


@dataclass(frozen=True)
class SelfCondition:
    """The previous prediction: `x: (B, N, K, 3)`, `nodes: (B, N, n_node)` and `edges: (B, P, n_edge)` probs."""

    x: torch.Tensor
    nodes: torch.Tensor
    edges: torch.Tensor


@dataclass(frozen=True)
class JointOutput:
    """`node_logits: (B, N, n_node)`, `edge_logits: (B, P, n_edge)`, `x: (B, N, K, 3)` predicted clean coordinates
    (centred on the visible atoms), `atom_mask: (B, N, K)` the visible atoms."""

    node_logits: torch.Tensor
    edge_logits: torch.Tensor
    x: torch.Tensor
    atom_mask: torch.Tensor

    def self_condition(self) -> SelfCondition:
        """This prediction as the next call's self-conditioning input (detached)."""
        return SelfCondition(self.x.detach(), self.node_logits.detach().softmax(-1),
                             self.edge_logits.detach().softmax(-1))  # fmt: skip


class JointNet(nn.Module):
    """The network of the module docstring: `forward(nodes, edges, x, t, sc=None) -> JointOutput`."""

    def __init__(self, config: NetConfig, tables: TokenTables) -> None:
        super().__init__()
        c, d = config, config.dim
        self.config = config
        self.register_buffer("atom_count", tables.atom_count.long())
        self.register_buffer("centre_slot", tables.centre_slot.long())
        self.register_buffer("edge_centres", tables.edge_centres.long())
        pairs = torch.tensor(pair_index(c.n_nodes), dtype=torch.long).reshape(-1, 2)
        self.register_buffer("pairs", pairs)
        self.atom_embed = nn.Embedding((c.n_node + 1) * c.slots, d)
        self.anchor_embed = nn.Embedding(2, d)
        self.time_embed = nn.Sequential(SinusoidalEmbedding(d, scale=100.0), nn.Linear(d, d), nn.SiLU())
        self.sc_nodes = nn.Linear(c.n_node, d, bias=False)
        self.edge_dim = d // 2
        self.edge_embed = nn.Embedding(c.n_edge + 2, self.edge_dim)  # + mask, + "same node"
        self.sc_edges = nn.Linear(c.n_edge, self.edge_dim, bias=False)
        self.rbf = nn.Linear(16, self.edge_dim)
        self.layers = nn.ModuleList(EGNNLayer(d, self.edge_dim, normalize=True) for _ in range(c.layers))
        self.node_head = nn.Sequential(nn.Linear(2 * d, d), nn.SiLU(), nn.Linear(d, c.n_node))
        self.edge_head = nn.Sequential(nn.Linear(2 * d + self.edge_dim, d), nn.SiLU(), nn.Linear(d, c.n_edge))

    def atom_mask(self, nodes: torch.Tensor) -> torch.Tensor:
        """nodes: (B, N) -> (B, N, K) bool, the visible atom slots."""
        slot = torch.arange(self.config.slots, device=nodes.device)
        return slot < self.atom_count[nodes][..., None]

    def _anchors(self, nodes: torch.Tensor, edges: torch.Tensor) -> torch.Tensor:
        """(B, N * K) long: 1 on atoms that are a centre of a decided edge."""
        b, n = nodes.shape
        k = self.config.slots
        out = torch.zeros(b, n * k + 1, dtype=torch.long, device=nodes.device)
        if edges.shape[1] == 0:
            return out[:, :-1]
        centres = self.edge_centres[edges]  # (B, P, 2)
        for side in range(2):
            node = self.pairs[:, side].expand(b, -1)  # (B, P)
            c = centres[..., side]
            slot = self.centre_slot[nodes.gather(1, node), c.clamp_min(0)]
            ok = (c >= 0) & (slot >= 0)
            out.scatter_(1, torch.where(ok, node * k + slot, n * k), 1)
        return out[:, :-1]

    def forward(
        self,
        nodes: torch.Tensor,
        edges: torch.Tensor,
        x: torch.Tensor,
        t: torch.Tensor,
        sc: SelfCondition | None = None,
    ) -> JointOutput:
        """nodes: (B, N), edges: (B, P) long tokens, x: (B, N, K, 3) coordinates, t: (B,) -> `JointOutput`."""
        c = self.config
        b, n = nodes.shape
        k, m = c.slots, n * c.slots
        if edges.shape != (b, len(self.pairs)) or x.shape != (b, n, k, 3) or t.shape != (b,):
            raise ValueError(f"nodes, edges, x, t: expected (B, {n}), (B, {len(self.pairs)}), (B, {n}, {k}, 3), "
                             f"(B,), got {tuple(edges.shape)}, {tuple(x.shape)}, {tuple(t.shape)}")  # fmt: skip
        mask = self.atom_mask(nodes).reshape(b, m)
        slot = torch.arange(k, device=x.device)
        h = self.atom_embed(nodes[..., None] * k + slot).reshape(b, m, -1)
        h = h + self.anchor_embed(self._anchors(nodes, edges)) + self.time_embed(t)[:, None]
        node_of = torch.arange(m, device=x.device) // k
        pair_tok = torch.full((b, n, n), c.n_edge + 1, dtype=torch.long, device=x.device)
        pair_tok[:, self.pairs[:, 0], self.pairs[:, 1]] = edges
        pair_tok[:, self.pairs[:, 1], self.pairs[:, 0]] = edges
        sc_pair = torch.zeros(b, n, n, self.edge_dim, device=x.device, dtype=x.dtype)
        if sc is not None:
            h = h + self.sc_nodes(sc.nodes)[:, node_of]
            e_sc = self.sc_edges(sc.edges)
            sc_pair[:, self.pairs[:, 0], self.pairs[:, 1]] = e_sc
            sc_pair[:, self.pairs[:, 1], self.pairs[:, 0]] = e_sc
        flat_x = mean_free(x.reshape(b, m, 3), mask)
        valid = mask[:, :, None] & mask[:, None, :] & ~torch.eye(m, dtype=torch.bool, device=x.device)
        bi, ti, si = valid.nonzero(as_tuple=True)  # batch, target atom, source atom
        attr = self.edge_embed(pair_tok[bi, node_of[ti], node_of[si]]) + sc_pair[bi, node_of[ti], node_of[si]]
        if sc is not None:
            sc_x = sc.x.reshape(b, m, 3)
            dist = (sc_x[bi, ti] - sc_x[bi, si]).norm(dim=-1, keepdim=True)
            centres = torch.linspace(0, 10, 16, device=x.device, dtype=x.dtype)
            attr = attr + self.rbf(torch.exp(-((dist - centres) ** 2)))
        edge_index = torch.stack([bi * m + si, bi * m + ti])
        hf, xf = h.reshape(b * m, -1), flat_x.reshape(b * m, 3)
        for layer in self.layers:
            out = layer(hf, xf, edge_index, attr)
            hf, xf = out.h, out.x
        h = hf.reshape(b, n, k, -1) * mask.reshape(b, n, k, 1)
        pooled = h.sum(2) / mask.reshape(b, n, k).sum(2, keepdim=True).clamp_min(1)
        node_in = torch.cat([pooled, self.atom_embed(nodes * k)], -1)
        node_logits = self.node_head(node_in)
        gi, gj = pooled[:, self.pairs[:, 0]], pooled[:, self.pairs[:, 1]]
        edge_logits = self.edge_head(torch.cat([gi, gj, self.edge_embed(edges)], -1))
        x1 = mean_free(xf.reshape(b, m, 3).clamp(-BOX, BOX), mask).reshape(b, n, k, 3)
        return JointOutput(node_logits, edge_logits, x1, mask.reshape(b, n, k))
