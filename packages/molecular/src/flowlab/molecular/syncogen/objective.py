"""SynCoGen's joint loss: MDLM's NELBO on node and pair tokens (core `masked_diffusion_loss` on a
`MaskedDiscretePath` with the linear-sigma schedule) plus flow matching on coordinates with data prediction.

At a shared core time t ~ U(0, 1): tokens are masked with probability 1 - kappa_t; coordinates are
x_t = (1 - t) x_0 + t x_1 with x_0 = `noise_scale` N(0, I), centred and Kabsch-aligned onto x_1 over the product's
atoms. Coordinate losses on the predicted x_1, weighted by w(t) = min(1 / (1 - t), 10): MSE, pairwise-distance MSE
within 5 Å, bond-length MSE (the distance-type terms only for t > 0.25). With self-conditioning, half of the steps
first predict without it and feed that (detached) prediction back.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from flowlab.core.config import Config
from flowlab.core.distributions import rand, randn
from flowlab.core.geometry import kabsch_align
from flowlab.core.losses import masked_diffusion_loss
from flowlab.core.paths import LinearSigmaKappa, MaskedDiscretePath
from flowlab.molecular.syncogen.model import JointNet

__all__ = ["LossConfig", "joint_loss", "token_paths"]


@dataclass(frozen=True)
class LossConfig(Config):
    """Weights of the graph NLL and the coordinate terms (MSE, pairwise distance, bond length), the source's
    `noise_scale`, the distance cutoff (Å) and the time after which distance-type terms count."""

    graph: float = 1.0
    mse: float = 1.0
    distance: float = 0.4
    bond: float = 0.2
    noise_scale: float = 0.2
    cutoff: float = 5.0
    distance_after: float = 0.25
    sigma_min: float = 1e-3
    sigma_max: float = 7.0

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("graph", "mse", "distance", "bond"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}: expected a weight >= 0, got {getattr(self, name)}")
        if self.noise_scale <= 0 or self.cutoff <= 0:
            raise ValueError("noise_scale, cutoff: expected positive numbers")


def token_paths(net: JointNet, config: LossConfig) -> tuple[MaskedDiscretePath, MaskedDiscretePath]:
    """The masked paths of node and pair tokens (mask ids n_node and n_edge) on the linear-sigma schedule."""
    kappa = LinearSigmaKappa(config.sigma_min, config.sigma_max)
    return MaskedDiscretePath(kappa, net.config.n_node), MaskedDiscretePath(kappa, net.config.n_edge)


def _pair_mse(pred: torch.Tensor, true: torch.Tensor, pairs: torch.Tensor) -> torch.Tensor:
    """pred, true: (B, M, 3), pairs: (B, Q, M, M) bool -> (B,) mean squared distance error over the pairs."""
    dp, dt = torch.cdist(pred, pred), torch.cdist(true, true)
    err = ((dp - dt) ** 2 * pairs).sum((1, 2))
    return err / pairs.sum((1, 2)).clamp_min(1)


def joint_loss(
    model: JointNet, batch: dict[str, torch.Tensor], generator: torch.Generator, *, config: LossConfig
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """batch: nodes (B, N), edges (B, P), x1 (B, N, K, 3), target (B, N, K), bonds (B, Q, 2) -> (loss, logs)."""
    net = model.module if hasattr(model, "module") else model
    nodes, edges, x1, target = batch["nodes"], batch["edges"], batch["x1"], batch["target"]
    b, n, k, _ = x1.shape
    m, device = n * k, x1.device
    node_path, edge_path = token_paths(net, config)
    t = rand((b,), generator=generator, device=device)
    s_nodes = node_path.sample(node_path.sample_source(nodes.shape, device=device), nodes, t, generator=generator)
    s_edges = edge_path.sample(edge_path.sample_source(edges.shape, device=device), edges, t, generator=generator)
    flat_target = target.reshape(b, m)
    x1 = x1.reshape(b, m, 3)
    x1 = x1 - _centre(x1, flat_target)
    x0 = config.noise_scale * randn((b, m, 3), generator=generator, device=device)
    x0 = kabsch_align(x0, x1, flat_target)
    x_t = ((1 - t)[:, None, None] * x0 + t[:, None, None] * x1).reshape(b, n, k, 3)
    sc = None
    if net.config.self_condition and bool(rand((), generator=generator) < 0.5):
        with torch.no_grad():
            sc = model(s_nodes.x_t, s_edges.x_t, x_t, t).self_condition()
    out = model(s_nodes.x_t, s_edges.x_t, x_t, t, sc)
    graph = masked_diffusion_loss(out.node_logits, s_nodes, node_path)
    if edges.shape[1]:
        graph = graph + masked_diffusion_loss(out.edge_logits, s_edges, edge_path)
    pred = out.x.reshape(b, m, 3)
    pred = pred - _centre(pred, flat_target)
    w = torch.clamp(1 / (1 - t).clamp_min(1e-6), max=10.0)
    mse = (((pred - x1) ** 2).sum(-1) * flat_target).sum(1) / flat_target.sum(1).clamp_min(1)
    both = flat_target[:, :, None] & flat_target[:, None, :] & ~torch.eye(m, dtype=torch.bool, device=device)
    close = both & (torch.cdist(x1, x1) < config.cutoff)
    dist = _pair_mse(pred, x1, close)
    bonds = batch["bonds"]
    bond_pairs = torch.zeros(b, m + 1, m + 1, dtype=x1.dtype, device=device)
    u, v = bonds.unbind(-1)
    u, v = torch.where(u < 0, m, u), torch.where(v < 0, m, v)
    bond_pairs[torch.arange(b, device=device)[:, None], u, v] = 1
    bond = _pair_mse(pred, x1, bond_pairs[:, :m, :m])
    late = (t > config.distance_after).to(x1.dtype)
    coord = w * (config.mse * mse + late * (config.distance * dist + config.bond * bond))
    loss = config.graph * graph + coord.mean()
    return loss, {"graph": graph.detach(), "mse": mse.mean().detach(), "dist": dist.mean().detach(),
                  "bond": bond.mean().detach()}  # fmt: skip


def _centre(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """x: (B, M, 3), mask: (B, M) -> (B, 1, 3) mean of the masked points."""
    w = mask[..., None].to(x.dtype)
    return (x * w).sum(1, keepdim=True) / w.sum(1, keepdim=True).clamp_min(1)
