"""The DiT of every variant: the core `DiT` (adaLN-Zero, class labels with a null label and label dropout) whose
odd-numbered blocks (1, 3, ... counting from 0) hold a mixture of experts, built through the DiT's `mlp_factory`.

Equal activated parameters (dense hidden width H = mlp_ratio dim, 256 at dim 64):

| variant | MoE block MLP | experts | width | activated |
|---|---|---|---|---|
| dense | core `dense_mlp` | - | H | H |
| promoe (+ no_rcl, softmax, sigmoid) | shared + prototypes | `num_routed` + 1 uncond. + 1 shared | H / 2 | shared + 1 |
| promoe_kmeans | as promoe, prototypes frozen at k-means centroids | as promoe | H / 2 | shared + 1 |
| promoe_no_cond | shared + prototypes | `num_routed` + 1 shared | H / 2 | shared + 1 |
| promoe_no_shared | prototypes | `num_routed` + 1 uncond. | H | 1 |
| tc | shared + linear top-1 | `num_routed` + 1 shared | H / 2 | shared + 1 |
| ec | shared + expert choice | `num_routed` + 1 shared | H / 2 | shared + 1 (mean) |
| diffmoe | ec (training), capacity predictor (inference) | `num_routed` + 1 shared | H / 2 | shared + 1 (mean) |

Every routed variant has the same `num_routed` experts to route conditional tokens among (the spec's TC-MoE: 6
routed, top-1), so the routing metrics compare equal numbers of clusters; ProMoE's unconditional expert is one more
expert in total, which only null-label tokens (the label-dropout share) reach. The routers' weights (E x dim) are
extra.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from flowlab.core.config import Config
from flowlab.core.nets.dit import DiT, dense_mlp
from flowlab.vision_gen.promoe.layers import DiffMoELite, ExpertChoiceMoE, ProMoEMLP, TokenChoiceMoE
from flowlab.vision_gen.promoe.names import VARIANTS

__all__ = ["ModelConfig", "moe_mlp", "promoe_dit"]


@dataclass(frozen=True)
class ModelConfig(Config):
    """A variant's network on `size` x `size` images of one channel: a core DiT (patch, dim, depth, heads, MLP ratio
    4) over `num_classes` labels dropped to the null label with probability `class_dropout`; MoE blocks with
    `num_routed` prototype experts (ProMoE), the RCL at `rcl_weight` and temperature `rcl_tau`, the token-choice
    load-balancing loss at `lb_weight`."""

    variant: str = "promoe"
    size: int = 8
    patch: int = 2
    dim: int = 64
    depth: int = 4
    heads: int = 4
    num_classes: int = 10
    class_dropout: float = 0.1
    num_routed: int = 6
    rcl_weight: float = 1.0
    rcl_tau: float = 0.07
    lb_weight: float = 0.01

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.variant not in VARIANTS:
            raise ValueError(f"variant: expected one of {VARIANTS}, got {self.variant!r}")
        for name in ("size", "patch", "dim", "depth", "heads", "num_classes", "num_routed"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: expected an integer >= 1, got {getattr(self, name)}")
        if self.size % self.patch or self.dim % 4 or self.dim % self.heads:
            raise ValueError(f"patch, dim, heads: need patch | size, 4 | dim and heads | dim, got patch={self.patch}, "
                             f"size={self.size}, dim={self.dim}, heads={self.heads}")  # fmt: skip
        if not 0 <= self.class_dropout < 1:
            raise ValueError(f"class_dropout: expected a probability in [0, 1), got {self.class_dropout}")
        for name in ("rcl_weight", "lb_weight"):
            if not 0 <= getattr(self, name) < math.inf:
                raise ValueError(f"{name}: expected a finite number >= 0, got {getattr(self, name)}")
        if not 0 < self.rcl_tau < math.inf:
            raise ValueError(f"rcl_tau: expected a positive temperature, got {self.rcl_tau}")

    @property
    def moe(self) -> bool:
        """Whether the variant's odd blocks hold a mixture of experts (all but dense)."""
        return self.variant != "dense"


def moe_mlp(config: ModelConfig, dim: int, hidden: int) -> nn.Module:
    """The MoE MLP of `config.variant` for a block of width `dim` whose dense MLP is `hidden` wide (see the table)."""
    half, routed = hidden // 2, config.num_routed
    if config.variant == "tc":
        return TokenChoiceMoE(dim, half, num_experts=routed, lb_weight=config.lb_weight)
    if config.variant == "ec":
        return ExpertChoiceMoE(dim, half, num_experts=routed)
    if config.variant == "diffmoe":
        return DiffMoELite(dim, half, num_experts=routed)
    variant = config.variant
    activation = {"promoe_softmax": "softmax", "promoe_sigmoid": "sigmoid"}.get(variant, "identity")
    weight = 0.0 if variant == "promoe_no_rcl" else config.rcl_weight
    shared = variant != "promoe_no_shared"
    return ProMoEMLP(dim, half if shared else hidden, num_routed=routed, activation=activation, shared=shared,
                     conditional=variant != "promoe_no_cond", learn_prototypes=variant != "promoe_kmeans",
                     rcl_weight=weight, rcl_tau=config.rcl_tau)  # fmt: skip


def promoe_dit(config: ModelConfig, *, seed: int = 0) -> DiT:
    """The variant's DiT with weights drawn from `seed` (torch's global generator is left as it was); "dense" is the
    core DiT with its default MLP, the others hold `moe_mlp` in the odd blocks."""
    if not config.moe:
        factory = None
    else:

        def factory(index: int, dim: int, hidden: int) -> nn.Module:
            return moe_mlp(config, dim, hidden) if index % 2 else dense_mlp(dim, hidden)

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return DiT(config.size, config.patch, 1, config.dim, config.depth, config.heads, num_classes=config.num_classes,
                   class_dropout=config.class_dropout, mlp_factory=factory)  # fmt: skip
