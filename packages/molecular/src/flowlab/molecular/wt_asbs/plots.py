"""Free-energy surfaces over (phi, psi), or any two torsions, as heat maps: `evaluate --plot` and the alanine
dipeptide benchmark draw them with `plot_fes`, one panel per FES, in k_BT above each panel's minimum on one colour
scale."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["FESPlot", "plot_fes"]


@dataclass(frozen=True)
class FESPlot:
    """The PNG written and the grids drawn, read back from the figure: per panel title, (G_psi, G_phi) F / kT above
    the panel's minimum, NaN where the FES is undefined (no sample in the cell)."""

    path: Path
    grids: dict[str, np.ndarray]


def _checked(title: str, fes: np.ndarray) -> np.ndarray:
    """A panel's FES as a (G, G) float64 array: finite values or NaN (undefined cells), at least one finite."""
    f = np.asarray(fes, dtype=np.float64)
    if f.ndim != 2 or f.shape[0] != f.shape[1] or f.size == 0:
        raise ValueError(f"panels: {title!r}: expected a (G, G) FES over (psi, phi), got shape {f.shape}")
    if np.isinf(f).any() or np.isnan(f).all():
        raise ValueError(f"panels: {title!r}: expected finite values (NaN where undefined), got inf or only NaN")
    return f


def plot_fes(
    path: str | os.PathLike[str],
    panels: Mapping[str, np.ndarray],
    kT: float,
    top: float = 15.0,
    labels: tuple[str, str] = ("phi", "psi"),
) -> FESPlot:
    """Draw each FES (G, G) in kJ/mol, (psi, phi)-indexed over [-pi, pi]^2 (OpenMM's order), as F / kT above its
    minimum, side by side on one colour scale capped at `top` kT, and write a PNG to `path` (its extension must be
    .png). NaN cells (no sample) stay blank. `labels` name the two torsions (x: the columns', y: the rows')."""
    from flowlab.core.bench import figure

    if Path(path).suffix != ".png":
        raise ValueError(f"path: expected a .png file, got {Path(path).name!r}")
    if not (math.isfinite(kT) and kT > 0):
        raise ValueError(f"kT: expected a positive energy in kJ/mol, got {kT!r}")
    if not panels:
        raise ValueError("panels: expected at least one FES to draw")
    scaled = {title: (f - np.nanmin(f)) / kT for title, f in ((t, _checked(t, f)) for t, f in panels.items())}
    vmax = min(top, max(float(np.nanmax(f)) for f in scaled.values())) or 1.0  # one scale for all (flat: 1)
    grids = {}
    with figure(path, ncols=len(scaled), size=(4.2 * len(scaled), 3.6), dpi=90) as (fig, axes):
        for ax, (title, f) in zip(np.atleast_1d(axes), scaled.items(), strict=True):
            im = ax.imshow(f, origin="lower", extent=(-math.pi, math.pi, -math.pi, math.pi), vmin=0, vmax=vmax)
            ax.set(title=title, xlabel=f"{labels[0]} (rad)", ylabel=f"{labels[1]} (rad)")
            ax.grid(False)  # the style's grid lines would cross the heat map
            fig.colorbar(im, ax=ax, label="F / kT")
            grids[title] = np.ma.filled(np.ma.masked_invalid(im.get_array()).astype(np.float64), np.nan)
    return FESPlot(Path(path), grids)
