"""Measuring a trained variant: its routing on real digits noised to a few times (the analysis of `analysis.py`,
per MoE layer and time, then averaged) and its sample quality (digits-FD beside its floor, class accuracy) at a
guidance scale.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from flowlab.core.nets.dit import DiT
from flowlab.core.paths import AffinePath
from flowlab.core.schedules import CondOT, DiscreteVP
from flowlab.vision_gen.kit.quality import class_histogram, fd_with_floor
from flowlab.vision_gen.promoe.analysis import (
    contingency,
    dead_experts,
    expert_class_nmi,
    subspace_similarity,
    utilisation_divergence,
    utilisation_entropy,
)
from flowlab.vision_gen.promoe.sample import sample_digits

__all__ = ["RoutingAnalysis", "routing_analysis", "sample_quality"]

#: the class subsets whose expert histograms `utilisation_divergence` compares
SUBSETS = ((0, 1, 2, 3, 4), (5, 6, 7, 8, 9))


@dataclass(frozen=True)
class RoutingAnalysis:
    """metrics: the routing measures averaged over MoE layers (and times): nmi (and nmi_t0p2 ... per time,
    nmi_block1 ... per MoE block), js_divergence, utilisation_entropy, dead_experts, experts_per_token (the routed
    experts a conditional token used, on average: 1 for top-1 routing), subspace_similarity, null_to_uncond (the
    share of null-label tokens sent to an unconditional expert; absent without one); nmi, js_divergence and
    utilisation_entropy are NaN where no token was routed; tables: "<layer>@t=<t>" -> the routing table (C, E) of the
    conditional tokens over the routed experts (empty for the dense variant)."""

    metrics: dict[str, float]
    tables: dict[str, torch.Tensor]


def _moe_layers(model: DiT) -> list[int]:
    return [i for i, block in enumerate(model.blocks) if hasattr(block.mlp, "experts")]


def routing_analysis(
    model: DiT, images: torch.Tensor, labels: torch.Tensor, *, objective: str = "rf",
    times: Sequence[float] = (0.2, 0.5, 0.8), rank: int = 8, seed: int = 0,
) -> RoutingAnalysis:  # fmt: skip
    """Route images (B, 1, S, S) with their labels (B,) noised to each of `times` along the objective's path (fresh
    seeded noise per time), and once with null labels; `rank`: the subspace rank of `subspace_similarity`."""
    layers = _moe_layers(model)
    if not layers:
        return RoutingAnalysis({}, {})
    if images.dim() != 4 or labels.shape != images.shape[:1]:
        raise ValueError(f"images, labels: expected (B, 1, S, S) and (B,), got {tuple(images.shape)}, "
                         f"{tuple(labels.shape)}")  # fmt: skip
    path = AffinePath(DiscreteVP.linear() if objective == "ddpm" else CondOT())
    g = torch.Generator().manual_seed(seed)
    tables: dict[str, torch.Tensor] = {}
    per_time: dict[float, list[float]] = {t: [] for t in times}
    was_training = model.training
    model.eval()
    with torch.inference_mode():
        for t in times:
            noise = torch.randn(images.shape, generator=g).to(images)
            tt = torch.full((images.shape[0],), float(t), device=images.device)
            out = model(x=path.sample(noise, images, tt).x_t, t=tt, y=labels, return_aux=True)
            for i in layers:
                routed = out.stats[f"blocks.{i}.routed"]
                dispatch = out.stats[f"blocks.{i}.dispatch"][..., routed].flatten(0, 1)
                token_labels = labels[:, None].expand(out.stats[f"blocks.{i}.dispatch"].shape[:2]).reshape(-1)
                tables[f"{i}@t={t:g}"] = contingency(dispatch, token_labels, model.num_classes).cpu()
                per_time[t].append(_if_routed(expert_class_nmi, tables[f"{i}@t={t:g}"]))
        tt = torch.full((images.shape[0],), float(times[len(times) // 2]), device=images.device)
        null = model(x=torch.randn(images.shape, generator=g).to(images), t=tt, y=None, return_aux=True).stats
    model.train(was_training)
    metrics = {"nmi": sum(map(sum, per_time.values())) / sum(map(len, per_time.values()))}
    metrics |= {f"nmi_t{t:g}".replace(".", "p"): sum(v) / len(v) for t, v in per_time.items()}
    metrics |= {f"nmi_block{i}": _mean([v[k] for v in per_time.values()]) for k, i in enumerate(layers)}
    metrics["js_divergence"] = _mean([_if_routed(utilisation_divergence, tab, *SUBSETS) for tab in tables.values()])
    loads = [sum(tab.sum(0) for name, tab in tables.items() if name.startswith(f"{i}@")) for i in layers]
    metrics["utilisation_entropy"] = _mean([_if_routed(utilisation_entropy, load) for load in loads])
    metrics["dead_experts"] = _mean([dead_experts(load) for load in loads])
    tokens_per_table = images.shape[0] * model.grid**2
    metrics["experts_per_token"] = _mean([float(t.sum()) / tokens_per_table for t in tables.values()])
    metrics["subspace_similarity"] = _mean([
        subspace_similarity(model.blocks[i].mlp.experts.w1[model.blocks[i].mlp.routed], rank) for i in layers
    ])  # fmt: skip
    uncond = [null[f"blocks.{i}.dispatch"][..., ~null[f"blocks.{i}.routed"]] for i in layers]
    if all(d.shape[-1] for d in uncond):
        metrics["null_to_uncond"] = _mean([float(d.any(-1).double().mean()) for d in uncond])
    return RoutingAnalysis(metrics, tables)


def _if_routed(metric: Callable[..., float], table: torch.Tensor, *subsets: Sequence[int]) -> float:
    """metric(table, *subsets) for a routing table (C, E) or an expert load (E,), or NaN where it is undefined: no
    token was routed (a DiffMoE-lite whose thresholds exceed every prediction), or one of `subsets`' classes got
    none."""
    rows = [table[list(subset)] for subset in subsets] or [table]
    return metric(table, *subsets) if all(float(r.sum()) > 0 for r in rows) else math.nan


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def sample_quality(
    model: DiT, *, n: int, objective: str = "rf", steps: int = 50, cfg_scale: float = 1.0, seed: int = 0,
) -> dict[str, float]:  # fmt: skip
    """digits-FD (against the test split, beside its real-vs-real floor at n) and class accuracy of n samples,
    labels 0-9 in turn, from seeded noise at guidance `cfg_scale`."""
    if not (isinstance(n, int) and n >= 2):
        raise ValueError(f"n: expected an integer >= 2, got {n!r}")
    device = next(model.parameters()).device
    labels = (torch.arange(n) % model.num_classes).to(device)
    noise = torch.randn(n, 1, model.image_size, model.image_size, generator=torch.Generator().manual_seed(seed))
    x = sample_digits(model.eval(), labels, noise.to(device), objective=objective, steps=steps,
                      cfg_scale=cfg_scale).cpu()  # fmt: skip
    fd = fd_with_floor(x, "test", seed=seed)
    return {"fd": fd.fd, "fd_floor": fd.floor, "accuracy": class_histogram(x, labels.cpu()).accuracy}
