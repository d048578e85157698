"""The analytic toy systems: Mueller-Brown, four-well and the four-well embedded in 5-D, each sampled along the CV x
with a Delta F between two x intervals; energies in k_BT (kT = 1)."""

from __future__ import annotations

import numpy as np
import torch

from flowlab.molecular.wt_asbs.bias import BiasConfig, WellTemperedBias
from flowlab.molecular.wt_asbs.cvs import CVSet, LinearCV
from flowlab.molecular.wt_asbs.names import TOYS
from flowlab.molecular.wt_asbs.potentials import EmbeddedToy, FourWell, MuellerBrown, ToyPotential

__all__ = ["TOYS", "TOY_INTERVALS", "make_toy", "toy_bias", "toy_cvs", "toy_source_mean"]

#: CV intervals (A, B) for Delta F_AB = F_B - F_A on each toy (CV = x).
TOY_INTERVALS = {
    "mueller-brown": ((-1.5, -0.3), (0.3, 1.2)),
    "four-well": ((-2.2, 0.0), (0.0, 2.2)),
    "four-well-5d": ((-2.2, 0.0), (0.0, 2.2)),
}


def make_toy(name: str) -> ToyPotential:
    """'mueller-brown' | 'four-well' | 'four-well-5d' (four-well + 3 harmonic dimensions)."""
    if name == "mueller-brown":
        return MuellerBrown()
    if name == "four-well":
        return FourWell()
    if name == "four-well-5d":
        return EmbeddedToy(FourWell(), 3)
    raise ValueError(f"system: expected mueller-brown|four-well|four-well-5d, got {name!r}")


def toy_cvs(pot: ToyPotential) -> CVSet:
    """The one CV s = x (the first coordinate) of a toy with pot.dim coordinates."""
    return CVSet([LinearCV([1.0] + [0.0] * (pot.dim - 1))])


def toy_bias(pot: ToyPotential, config: BiasConfig) -> WellTemperedBias:
    """An empty bias along x over the toy's box (energies in kT)."""
    (lo, hi), _ = pot.box
    return config.build(lo, hi, kT=1.0)


def toy_source_mean(pot: ToyPotential) -> torch.Tensor:
    """The sampler's source mean: (D,) float32, the mean of the toy's minima in (x, y), 0 in the extra dimensions."""
    return torch.tensor(np.mean(pot.minima, axis=0).tolist() + [0.0] * (pot.dim - 2), dtype=torch.float32)
