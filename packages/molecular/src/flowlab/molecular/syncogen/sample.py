"""Joint sampling: MDLM unmasking of node and pair tokens (core `ctmc_step`, with `GraphConstraints`' allowed
masks when given: pairs first, one at a time, then nodes) and Euler integration of the coordinates, on one time
grid.

Coordinates: x <- x + f (x_hat_1 - x) with f = min(dt (1 + a t) / (1 - t), 1), the velocity (x_hat_1 - x) / (1 - t)
scaled by the inference annealing factor 1 + a t (a = `anneal`); the last step lands on x_hat_1. The last token
step unmasks everything still masked (jump probability 1). With self-conditioning each step feeds the previous
prediction back.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from flowlab.core.distributions import randn
from flowlab.core.solvers import ctmc_step, jump_probabilities
from flowlab.molecular.syncogen.constraints import GraphConstraints
from flowlab.molecular.syncogen.model import JointNet
from flowlab.molecular.syncogen.objective import LossConfig, token_paths

__all__ = ["Samples", "sample_joint"]


@dataclass(frozen=True)
class Samples:
    """`nodes: (B, N)`, `edges: (B, P)` tokens (mask ids where a token stayed masked), `x: (B, N, K, 3)`."""

    nodes: torch.Tensor
    edges: torch.Tensor
    x: torch.Tensor


def sample_joint(
    model: JointNet,
    n: int,
    *,
    steps: int = 100,
    constraints: GraphConstraints | None = None,
    loss_config: LossConfig | None = None,
    anneal: float = 10.0,
    generator: torch.Generator,
    device: torch.device | str = "cpu",
) -> Samples:
    """Draw `n` graphs with coordinates from `model` in `steps` steps (see the module docstring)."""
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n: expected a positive integer, got {n!r}")
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps: expected a positive integer, got {steps!r}")
    if anneal < 0:
        raise ValueError(f"anneal: expected a number >= 0, got {anneal}")
    cfg = model.config
    loss_config = loss_config or LossConfig()
    node_path, edge_path = token_paths(model, loss_config)
    n_pairs = cfg.n_nodes * (cfg.n_nodes - 1) // 2
    nodes = torch.full((n, cfg.n_nodes), cfg.n_node, dtype=torch.long, device=device)
    edges = torch.full((n, n_pairs), cfg.n_edge, dtype=torch.long, device=device)
    x = loss_config.noise_scale * randn((n, cfg.n_nodes, cfg.slots, 3), generator=generator, device=device)
    grid = torch.linspace(0, 1, steps + 1, device=device)
    jump = jump_probabilities(node_path, grid)
    jump[-1] = 1.0
    sc = None
    with torch.inference_mode():
        for i in range(steps):
            t = grid[i].expand(n)
            out = model(nodes, edges, x, t, sc)
            if cfg.self_condition:
                sc = out.self_condition()
            if constraints is None:
                edges = ctmc_step(edge_path, edges, out.edge_logits, jump[i], generator=generator)
            else:
                for p in range(n_pairs):
                    allowed_p = constraints.edge_allowed(nodes, edges)[:, p : p + 1]
                    edges = edges.clone()
                    edges[:, p : p + 1] = ctmc_step(edge_path, edges[:, p : p + 1], out.edge_logits[:, p : p + 1],
                                                    jump[i], allowed=allowed_p, generator=generator)  # fmt: skip
            allowed = None if constraints is None else constraints.node_allowed(nodes, edges)
            nodes = ctmc_step(node_path, nodes, out.node_logits, jump[i], allowed=allowed, generator=generator)
            dt = grid[i + 1] - grid[i]
            factor = torch.clamp(dt * (1 + anneal * grid[i]) / (1 - grid[i]), max=1.0)
            x = x + factor * (out.x - x)
    return Samples(nodes, edges, x)
