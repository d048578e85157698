"""The readable pictures of the interpretability procedures, as PNGs (matplotlib through the core's `figure`):
each prototype's best-matching patch (what), the pixel-change heat maps of boosting each prototype (where), and
the activations of x̂_0 along sampling (when). Image rows (originals against boosted or scaled regenerations) use
the kit's `strip_figure`."""

from __future__ import annotations

import math
import os

import torch

from flowlab.core.bench import figure
from flowlab.vision_gen.kit.data import to_unit
from flowlab.vision_gen.patronus.model import PatronusModel

__all__ = ["emergence_plot", "heat_map_grid", "prototype_patches"]


def _grid(n: int, ncol: int = 8) -> tuple[int, int]:
    return math.ceil(n / min(n, ncol)), min(n, ncol)


def prototype_patches(path: str | os.PathLike[str], model: PatronusModel, images: torch.Tensor) -> None:
    """What each prototype learned: for every p_j, the image of `images` (N, 1, S, S) holding its closest patch,
    that patch's receptive field outlined, titled with j and the activation s_j there."""
    encoder = model.prototype_encoder
    with torch.inference_mode():
        out = encoder(images)
    m = encoder.num_prototypes
    best = out.d2_min.argmin(0)
    rows, cols = _grid(m)
    with figure(path, nrows=rows, ncols=cols, size=(1.2 * cols, 1.35 * rows), squeeze=False) as (_, axes):
        for j, ax in enumerate(axes.flat):
            ax.set_axis_off()
            if j >= m:
                continue
            i = int(best[j])
            ax.imshow(to_unit(images[i, 0]).cpu().numpy(), cmap="gray", vmin=0, vmax=1)
            cell = int(out.argmin_cell[i, j])
            r, c = encoder.receptive_field(divmod(cell, encoder.cells))
            x0, x1, y0, y1 = c.start - 0.5, c.stop - 0.5, r.start - 0.5, r.stop - 0.5
            ax.plot([x0, x1, x1, x0, x0], [y0, y0, y1, y1, y0], color="red", linewidth=1.5)
            ax.set_title(f"p{j}  s={float(out.s[i, j]):.1f}", fontsize=7)


def heat_map_grid(path: str | os.PathLike[str], heat: torch.Tensor, prototypes: tuple[int, ...]) -> None:
    """Where each prototype acts: heat (J, S, S), the mean |Δx| of boosting prototype prototypes[k] (one panel each,
    its own colour scale)."""
    rows, cols = _grid(len(prototypes))
    with figure(path, nrows=rows, ncols=cols, size=(1.2 * cols, 1.3 * rows), squeeze=False) as (_, axes):
        for k, ax in enumerate(axes.flat):
            ax.set_axis_off()
            if k < len(prototypes):
                ax.imshow(heat[k].cpu().numpy(), cmap="magma")
                ax.set_title(f"boost p{prototypes[k]}", fontsize=7)


def emergence_plot(path: str | os.PathLike[str], curve: torch.Tensor, *, top: int = 8) -> None:
    """When prototypes emerge: curve (steps, m), the activations of x̂_0 at each sampling step; the `top`
    prototypes with the largest final activation, each divided by its final value."""
    steps = curve.shape[0]
    order = curve[-1].argsort(descending=True)[:top]
    x = torch.arange(1, steps + 1) / steps
    with figure(path, size=(5.2, 3.4)) as (_, ax):
        for j in order.tolist():
            ax.plot(x.numpy(), (curve[:, j] / curve[-1, j].clamp_min(1e-8)).cpu().numpy(), label=f"p{j}")
        ax.set_xlabel("sampling progress (noise -> data)")
        ax.set_ylabel("s_j(x̂_0) / final s_j")
        ax.legend(fontsize=6, ncol=2)
