"""The pieces of a `mol.wt_asbs.aldp` run: a (WT-)ASBS sampler trained on the peptide in either coordinate system
with its samples and path weights, the hill check, the path-weight estimate and the WTMetaD reference."""

from __future__ import annotations

import math
import time

import torch

from flowlab.core.bench import BenchContext
from flowlab.molecular.wt_asbs.aldp import (
    basin_df_from_samples,
    cv_source_std,
    internal_system,
    torsion_bias,
    torsion_cvs,
)
from flowlab.molecular.wt_asbs.aldp_reference import AldpReference, aldp_reference
from flowlab.molecular.wt_asbs.asbs import ASBS
from flowlab.molecular.wt_asbs.potentials import OpenMMPotential
from flowlab.molecular.wt_asbs.reference import openmm_wtmetad

__all__ = ["hill_check", "path_estimate", "reference", "run_sampler"]


def run_sampler(cfg, pot: OpenMMPotential, x_ref: torch.Tensor, seed: int, *, wt: bool) -> dict:
    """Train (WT-)ASBS on the peptide in the variant's coordinates and draw n_eval samples with their path-space
    weights on internal coordinates: {"model", "log", "phi_psi": (N, 2), "x": (N, 66) nm, "path_w": (N,) normalised
    or None, "evals", "wall"} (energy calls of this sampler alone, the weights' one per sample included)."""
    kT, evals0, start = pot.kT, pot.n_evals, time.perf_counter()
    std = None
    if cfg.coordinates == "internal":
        target, cvs = internal_system(pot, x_ref, cfg.torsion_scale)
        atom_dim, mean, to_x = 1, None, target.cartesian
        std = cv_source_std(target, cvs, cfg.sampler.source_std, cfg.cv_source_std)
    else:
        target, cvs, atom_dim, mean, to_x = pot, torsion_cvs(), 3, x_ref[0], lambda x: x
    bias = torsion_bias(cfg.sampler.bias, kT) if wt else None
    model = ASBS.from_config(
        target, cfg.sampler, source_mean=mean, cvs=cvs if wt else None, bias=bias, atom_dim=atom_dim,
        generator=torch.Generator().manual_seed(seed), source_std=std,
    )  # fmt: skip
    log = model.train()
    if cfg.coordinates == "internal":
        _, x1, log_w = model.sample_weighted(cfg.n_eval)
        path_w = torch.softmax(log_w, 0)
    else:  # in 66-D Cartesian coordinates at CPU size the weights are degenerate (ESS 0.4 % on the quick variant)
        (_, x1), path_w = model.sample(cfg.n_eval), None
    s = cvs(x1.double())
    return {"model": model, "log": log, "phi_psi": s, "x": to_x(x1.double()), "path_w": path_w,
            "evals": pot.n_evals - evals0, "wall": time.perf_counter() - start}  # fmt: skip


def path_estimate(run: dict, kT: float) -> dict[str, float]:
    """Delta F of the basins from a sampler's path-space weights (`dF_path_*`) and their ESS fraction."""
    w = run["path_w"]
    out = {f"dF_path_{k[3:]}": v for k, v in basin_df_from_samples(run["phi_psi"].numpy(), w.numpy(), kT).items()}
    out["ess_path_frac"] = float(1 / (w**2).sum()) / len(w)
    return out


def hill_check(bias, s: torch.Tensor, sigma: float) -> float:
    """One more deposition adds exactly the periodic Gaussians at the CVs s: (8, 2): the largest deviation (the
    bias is restored afterwards)."""
    before = bias.values.clone()
    heights = bias.add_hills(s)
    n0, n1 = bias.nodes
    d0 = torch.remainder(n0[None, :] - s[:, 0:1] + math.pi, 2 * math.pi) - math.pi
    d1 = torch.remainder(n1[None, :] - s[:, 1:2] + math.pi, 2 * math.pi) - math.pi
    expect = torch.einsum(
        "bi,bj->ij", heights[:, None] * torch.exp(-0.5 * (d0 / sigma) ** 2), torch.exp(-0.5 * (d1 / sigma) ** 2)
    )
    err = float((bias.values - before - expect).abs().max())
    bias.load_state_dict({"values": before, "grads": bias.grads, "n_hills": torch.tensor(bias.n_hills)})
    return err


def reference(cfg, ctx: BenchContext, prmtop, inpcrd) -> AldpReference:
    """The converged cached reference of the variant, or a WTMetaD run of md_steps in this process."""
    if cfg.reference is not None:
        return aldp_reference(cfg.reference, ctx.data_root)
    meta = openmm_wtmetad(
        prmtop, inpcrd, steps=cfg.md_steps, solvent=cfg.solvent, seed=ctx.seed,
        bias_factor=cfg.sampler.bias.bias_factor, grid=cfg.sampler.bias.bins, height=cfg.metad_height,
        frequency=cfg.metad_frequency,
    )  # fmt: skip
    return AldpReference(meta.fes, meta.fes[None], meta.cvs, cfg.md_steps, meta.seconds, meta.energy_evals)
