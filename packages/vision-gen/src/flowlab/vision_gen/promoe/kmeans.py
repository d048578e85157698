"""The k-means-routing ablation: ProMoE whose prototypes are frozen at the k-means centroids of the tokens each MoE
layer receives, instead of being learned.

The centroids are fitted once, before training, on the network as initialised: conditional tokens of training
images noised along the objective's path at uniform times. The layers are fitted in order (a layer's tokens are
read after the layers before it route by their centroids). Routing is by cosine, so the tokens are normalised to
the unit sphere first and clustered there by scikit-learn's (Euclidean) `KMeans`.
"""

from __future__ import annotations

import torch
from sklearn.cluster import KMeans

from flowlab.core.nets.dit import DiT
from flowlab.core.paths import AffinePath
from flowlab.core.schedules import CondOT, DiscreteVP
from flowlab.vision_gen.promoe.experts import positive_int
from flowlab.vision_gen.promoe.layers import ProMoEMLP

__all__ = ["fit_kmeans_prototypes"]


def fit_kmeans_prototypes(
    model: DiT, images: torch.Tensor, labels: torch.Tensor, *, objective: str = "rf", max_tokens: int = 8192,
    seed: int = 0,
) -> int:  # fmt: skip
    """Set the prototypes of every ProMoE layer of `model` to k-means centroids of its conditional input tokens on
    images (B, 1, S, S) with labels (B,) (at most `max_tokens` tokens per layer, drawn by `seed`). Returns the
    number of layers fitted (0: the model has no ProMoE layer)."""
    positive_int(max_tokens, "max_tokens")
    layers = [block.mlp for block in model.blocks if isinstance(block.mlp, ProMoEMLP)]
    if not layers:
        return 0
    if images.dim() != 4 or labels.shape != images.shape[:1] or images.shape[0] < 1:
        raise ValueError(f"images, labels: expected (B, 1, S, S) and (B,) with B >= 1, got {tuple(images.shape)}, "
                         f"{tuple(labels.shape)}")  # fmt: skip
    g = torch.Generator().manual_seed(seed)
    path = AffinePath(DiscreteVP.linear() if objective == "ddpm" else CondOT())
    t = torch.rand(images.shape[0], generator=g).to(images)
    x_t = path.sample(torch.randn(images.shape, generator=g).to(images), images, t).x_t
    was_training = model.training
    model.eval()
    for layer in layers:
        tokens = torch.nn.functional.normalize(_layer_input(model, layer, x_t, t, labels).double(), dim=-1).cpu()
        k = layer.router.num_experts
        if tokens.shape[0] < k:
            raise ValueError(f"images: {tokens.shape[0]} tokens cannot give {k} centroids; pass more images")
        if max_tokens < k:
            raise ValueError(f"max_tokens: expected at least the {k} centroids' number, got {max_tokens}")
        keep = torch.randperm(tokens.shape[0], generator=g)[:max_tokens]
        kmeans = KMeans(k, n_init=4, random_state=seed).fit(tokens[keep].numpy())
        centroids = torch.from_numpy(kmeans.cluster_centers_)
        with torch.no_grad():
            layer.router.prototypes.copy_(centroids.to(layer.router.prototypes))
    model.train(was_training)
    return len(layers)


def _layer_input(model: DiT, layer: torch.nn.Module, x: torch.Tensor, t: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The tokens (B N, dim) that `layer`, one of the model's block MLPs, receives on the model's input x, t, y."""
    captured: list[torch.Tensor] = []
    hook = layer.register_forward_pre_hook(lambda module, args: captured.append(args[0].detach()))
    try:
        with torch.inference_mode():
            model(x=x, t=t, y=y)
    finally:
        hook.remove()
    return captured[0].flatten(0, 1)
