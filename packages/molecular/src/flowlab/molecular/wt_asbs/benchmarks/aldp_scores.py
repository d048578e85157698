"""Scores of `mol.wt_asbs.aldp`: torsion-marginal KL and W2 against a reference FES (ASBS Table 3's metrics), the
bias FES on OpenMM's grid, Delta F errors against the reference, and what WTMetaD needed to reach the same accuracy."""

from __future__ import annotations

import math

import numpy as np
import torch

from flowlab.molecular.wt_asbs.aldp import basin_df_from_fes
from flowlab.molecular.wt_asbs.aldp_reference import AldpReference
from flowlab.molecular.wt_asbs.analysis import torsion_marginal_kl, torsion_w2
from flowlab.molecular.wt_asbs.bias import WellTemperedBias

__all__ = ["bias_fes", "df_error", "evals_to_match", "torsion_scores"]


def _fes_points(fes: np.ndarray, kT: float, stride: int) -> tuple[torch.Tensor, torch.Tensor]:
    """An FES on a (G, G) grid over [-pi, pi]^2 (OpenMM order: psi, phi) as weighted points: ((phi, psi) (M, 2),
    Boltzmann weights (M,)), every `stride`-th node, the duplicate node at +pi dropped."""
    g = fes.shape[0]
    nodes = torch.linspace(-math.pi, math.pi, g, dtype=torch.float64)[:-1:stride]
    f = torch.as_tensor(fes, dtype=torch.float64)[:-1:stride, :-1:stride]
    psi, phi = torch.meshgrid(nodes, nodes, indexing="ij")
    return torch.stack([phi.flatten(), psi.flatten()], 1), torch.exp(-(f - f.min()).flatten() / kT)


def torsion_scores(fes: np.ndarray, kT: float, s, w=None, max_points: int = 2000) -> dict[str, float]:
    """KL of the phi and psi marginals and W2 on (phi, psi) against an FES (ASBS Table 3's metrics); s: (N, 2)
    radians, w: (N,) weights or None. The KL histograms take every sample (a rare basin's few reweighted samples
    decide its bins) and the reference's every grid node (a coarser one aliases against the histogram bins: about
    0.06 nats at stride 3); W2, an exact transport plan, takes at most `max_points` evenly spaced samples against
    every third node."""
    s = torch.as_tensor(np.asarray(s), dtype=torch.float64)
    w = None if w is None else torch.as_tensor(np.asarray(w), dtype=torch.float64)
    ref, ref_w = _fes_points(fes, kT, stride=1)
    kl = torsion_marginal_kl(ref, s, ref_weights=ref_w, weights=w)
    keep = torch.linspace(0, len(s) - 1, min(len(s), max_points)).long()
    ref, ref_w = _fes_points(fes, kT, stride=3)
    return {
        "KL_phi": float(kl[0]),
        "KL_psi": float(kl[1]),
        "W2_phi_psi": torsion_w2(ref, s[keep], ref_weights=ref_w, weights=None if w is None else w[keep]),
    }


def bias_fes(bias: WellTemperedBias, grid: int) -> np.ndarray:
    """The bias estimate F = -gamma/(gamma - 1) V interpolated at OpenMM's (G, G) nodes over [-pi, pi] (its order:
    psi, phi), kJ/mol."""
    nodes = torch.linspace(-math.pi, math.pi, grid, dtype=torch.float64)
    psi_n, phi_n = torch.meshgrid(nodes, nodes, indexing="ij")
    return bias.free_energy(torch.stack([phi_n.flatten(), psi_n.flatten()], 1)).reshape(psi_n.shape).numpy()


def df_error(df: dict[str, float], ref: dict[str, float], kT: float, prefix: str = "dF_") -> float:
    """The largest |Delta F - reference| over the basins, in kT (`df` keyed prefix + basin, `ref` dF_ + basin)."""
    return max(abs(df[prefix + k.removeprefix("dF_")] - v) for k, v in ref.items()) / kT


def evals_to_match(reference: AldpReference, kT: float, error_kT: float) -> float:
    """The MD steps (= energy calls) after which the reference's own Delta F stays within `error_kT` of its final
    value at every later snapshot: what WTMetaD needed for the accuracy a sampler reached (NaN if never)."""
    final = basin_df_from_fes(reference.fes, kT)
    errs = [df_error(basin_df_from_fes(f, kT), final, kT) for f in reference.fes_history]
    ok = np.array([e <= error_kT for e in errs])
    for i in range(len(ok)):
        if ok[i:].all():
            return float(reference.fes_every * (i + 1))
    return float("nan")
