"""Benchmark `mol.wt_asbs.aldp`: alanine dipeptide (ff96/OBC1), WT-ASBS vs OpenMM well-tempered metadynamics and
plain MD on the same energy.

Metrics: Delta F (kJ/mol) of C7ax/aR/aL relative to C7eq, basins visited, energy calls, the FES RMSE of the bias
estimate and KL(phi), KL(psi), W2(phi, psi) against the same run's WTMetaD FES (ASBS Table 3's metrics, the published
numbers beside them); both FES plotted to `wt_asbs_aldp_fes.png`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

import numpy as np
import torch

from flowlab.core.bench import BenchContext, BenchResult, Curve, Scenario, require_file
from flowlab.molecular.wt_asbs.aldp import (
    DATASET,
    INPCRD,
    PRMTOP,
    basin_df_from_fes,
    basin_df_from_samples,
    basins_visited,
    torsion_bias,
    torsion_cvs,
)
from flowlab.molecular.wt_asbs.analysis import reweight, torsion_marginal_kl, torsion_w2
from flowlab.molecular.wt_asbs.asbs import ASBS, ASBSConfig, SamplerConfig
from flowlab.molecular.wt_asbs.benchmarks.common import CLIP_100_PER_ANGSTROM, WTASBSBench, sampler_seed
from flowlab.molecular.wt_asbs.bias import BiasConfig
from flowlab.molecular.wt_asbs.plots import plot_fes
from flowlab.molecular.wt_asbs.potentials import OpenMMPotential
from flowlab.molecular.wt_asbs.reference import openmm_md, openmm_wtmetad

__all__ = ["ALDP", "ALDP_FULL", "ALDP_QUICK", "AldpBench", "run_aldp"]


@dataclass(frozen=True)
class AldpBench(WTASBSBench):
    """solvent: OpenMM implicit solvent; workers: OpenMM contexts evaluating the sampler's energies; md_steps: 2 fs
    steps of each OpenMM reference; metad_height (kJ/mol), metad_frequency (steps): OpenMM WTMetaD's hills (its
    grid and bias factor are the sampler's bias's)."""

    solvent: str | None
    workers: int
    md_steps: int
    metad_height: float
    metad_frequency: int


def _fes_points(fes: np.ndarray, kT: float, stride: int) -> tuple[torch.Tensor, torch.Tensor]:
    """An FES on a (G, G) grid over [-pi, pi]^2 (OpenMM order: psi, phi) as weighted points: ((phi, psi) (M, 2),
    Boltzmann weights (M,)), every `stride`-th node, the duplicate node at +pi dropped."""
    g = fes.shape[0]
    nodes = torch.linspace(-math.pi, math.pi, g, dtype=torch.float64)[:-1:stride]
    f = torch.as_tensor(fes, dtype=torch.float64)[:-1:stride, :-1:stride]
    psi, phi = torch.meshgrid(nodes, nodes, indexing="ij")
    return torch.stack([phi.flatten(), psi.flatten()], 1), torch.exp(-(f - f.min()).flatten() / kT)


def _torsion_scores(fes: np.ndarray, kT: float, s, w=None, max_points: int = 2000) -> dict[str, float]:
    """KL of the phi and psi marginals and W2 on (phi, psi) against an FES (ASBS Table 3's metrics); s: (N, 2)
    radians, w: (N,) weights or None; at most `max_points` evenly spaced samples. The KL's reference keeps every
    grid node (a coarser one aliases against the histogram bins: about 0.06 nats at stride 3); W2's every third."""
    s = torch.as_tensor(np.asarray(s), dtype=torch.float64)
    keep = torch.linspace(0, len(s) - 1, min(len(s), max_points)).long()
    s, w = s[keep], None if w is None else torch.as_tensor(np.asarray(w), dtype=torch.float64)[keep]
    ref, ref_w = _fes_points(fes, kT, stride=1)
    kl = torsion_marginal_kl(ref, s, ref_weights=ref_w, weights=w)
    ref, ref_w = _fes_points(fes, kT, stride=3)
    return {
        "KL_phi": float(kl[0]),
        "KL_psi": float(kl[1]),
        "W2_phi_psi": torsion_w2(ref, s, ref_weights=ref_w, weights=w),
    }


def run_aldp(ctx: BenchContext) -> BenchResult:
    """Train WT-ASBS on alanine dipeptide (the shared prmtop/inpcrd), run OpenMM well-tempered metadynamics as the
    reference in the same process, and score both: basins, ESS, basin free-energy differences, the bias FES against
    metadynamics' and the (phi, psi) marginals' KL and W2."""
    cfg: AldpBench = ctx.config
    prmtop = require_file(ctx.data_root, DATASET, PRMTOP)
    inpcrd = require_file(ctx.data_root, DATASET, INPCRD)
    solvent, sigma = cfg.solvent, cfg.sampler.bias.sigma
    pot = OpenMMPotential(prmtop, solvent=solvent, workers=cfg.workers, platform="Reference")
    kT = pot.kT
    x_ref = pot.positions(inpcrd).float()
    cvs, bias = torsion_cvs(), torsion_bias(cfg.sampler.bias, kT)
    seed = sampler_seed(ctx.generator)
    model = ASBS.from_config(
        pot,
        cfg.sampler,
        source_mean=x_ref[0],
        cvs=cvs,
        bias=bias,
        atom_dim=3,
        generator=torch.Generator().manual_seed(seed),
    )
    start = time.perf_counter()
    log = model.train()
    _, x1 = model.sample(cfg.n_eval)
    wall = time.perf_counter() - start
    s = cvs(x1.double())
    v = bias(s).value
    w = reweight(v, kT)
    # sanity: one more deposition adds exactly the periodic Gaussians at the sampled CVs
    before = bias.values.clone()
    heights = bias.add_hills(s[:8])
    n0, n1 = bias.nodes
    d0 = torch.remainder(n0[None, :] - s[:8, 0:1] + math.pi, 2 * math.pi) - math.pi
    d1 = torch.remainder(n1[None, :] - s[:8, 1:2] + math.pi, 2 * math.pi) - math.pi
    expect = torch.einsum(
        "bi,bj->ij",
        heights[:, None] * torch.exp(-0.5 * (d0 / sigma) ** 2),
        torch.exp(-0.5 * (d1 / sigma) ** 2),
    )
    hill_err = float((bias.values - before - expect).abs().max())
    bias.load_state_dict({"values": before, "grads": bias.grads, "n_hills": torch.tensor(bias.n_hills)})
    phi_psi = s.numpy()
    ours = {
        "evals": float(pot.n_evals),
        "wall_s": wall,
        "basins": basins_visited(phi_psi),
        "bias_max_kjmol": float(bias.values.max()),
        "hills": float(bias.n_hills),
        "hill_check_err": hill_err,
        "ess_frac": float(1 / (w**2).sum()) / len(w),
        "bias_grew": float(all(b2 >= b1 for b1, b2 in zip(log.max_bias, log.max_bias[1:], strict=False))),
    }
    ours.update(basin_df_from_samples(phi_psi, w.numpy(), kT))

    meta = openmm_wtmetad(
        prmtop,
        inpcrd,
        steps=cfg.md_steps,
        solvent=solvent,
        seed=ctx.seed,
        bias_factor=cfg.sampler.bias.bias_factor,
        grid=cfg.sampler.bias.bins,
        height=cfg.metad_height,
        frequency=cfg.metad_frequency,
    )
    metad = {"evals": float(meta.energy_evals), "wall_s": meta.seconds, "basins": basins_visited(meta.cvs)}
    metad.update(basin_df_from_fes(meta.fes, kT))
    md = openmm_md(prmtop, inpcrd, steps=cfg.md_steps, solvent=solvent, seed=ctx.seed)
    plain = {"evals": float(md.energy_evals), "wall_s": md.seconds, "basins": basins_visited(md.cvs)}
    plain.update(basin_df_from_samples(md.cvs, None, kT))
    # FES RMSE (kT) of WT-ASBS' bias estimate against the metadynamics FES on the metad-visited region (< 20 kT),
    # the bias interpolated at OpenMM's nodes (its grid spans [-pi, pi] with G nodes, ours [-pi, pi) with G)
    nodes = torch.linspace(-math.pi, math.pi, meta.fes.shape[0], dtype=torch.float64)
    psi_n, phi_n = torch.meshgrid(nodes, nodes, indexing="ij")  # OpenMM's (psi, phi) layout
    f_ours = bias.free_energy(torch.stack([phi_n.flatten(), psi_n.flatten()], 1)).reshape(psi_n.shape).numpy()
    f_meta = meta.fes - meta.fes.min()
    mask = f_meta < 20 * kT
    diff = (f_ours - f_meta)[mask] / kT
    ours["fes_rmse_vs_metad"] = float(np.sqrt(np.mean((diff - diff.mean()) ** 2)))
    # torsion-marginal KL and W2 against the metadynamics FES, as in the published table beside them
    ours.update(_torsion_scores(meta.fes, kT, phi_psi, w.numpy()))
    plain.update(_torsion_scores(meta.fes, kT, md.cvs))
    ctx.out_dir.mkdir(parents=True, exist_ok=True)
    fes_png = ctx.out_dir / "wt_asbs_aldp_fes.png"
    plot_fes(fes_png, {"WT-ASBS (bias)": f_ours, "WTMetaD (OpenMM)": f_meta}, kT)
    refs = {"ASBS [paper, internal coords, d=60]": {"KL_phi": 0.02, "KL_psi": 0.01, "W2_phi_psi": 0.25}}
    curve = Curve(
        title="WT-ASBS max bias (kJ/mol) per epoch",
        xlabel="energy evaluations",
        ylabel="max V",
        lines={"WT-ASBS": ([float(e) for e in log.energy_evals], log.max_bias)},
    )
    return BenchResult(
        metrics=ours,
        baselines={"WTMetaD (OpenMM)": metad, "Langevin MD (OpenMM)": plain},
        references=refs,
        plots=[fes_png],
        curves=[curve],
    )


ALDP_FULL = AldpBench(
    sampler=SamplerConfig(
        asbs=ASBSConfig(
            stages="ACACACACA",
            adjoint_epochs=1000,
            corrector_epochs=500,
            steps_per_epoch=100,
            batch_size=64,
            new_samples=256,
            buffer_size=2048,
            sde_steps=250,
            skip_epochs=50,
            lr=1e-4,
            force_clip=CLIP_100_PER_ANGSTROM,
        ),
        bias=BiasConfig(bins=150, sigma=0.2, height=0.0482, bias_factor=8.0),
        sigma_max=0.6,
        sigma_min=1e-4,
        source_std=0.05,
    ),
    n_eval=4096,
    solvent="OBC1",
    workers=8,
    md_steps=2_500_000,
    metad_height=1.0,
    metad_frequency=500,
)
#: a CPU sanity check: a short curriculum, a narrow noise and 50 ps of the references
ALDP_QUICK = replace(
    ALDP_FULL,
    sampler=replace(
        ALDP_FULL.sampler,
        asbs=replace(
            ALDP_FULL.sampler.asbs,
            stages="ACA",
            adjoint_epochs=12,
            corrector_epochs=6,
            steps_per_epoch=10,
            new_samples=64,
            buffer_size=512,
            sde_steps=50,
            skip_epochs=5,
            lr=1e-3,
        ),
        sigma_max=0.05,
        source_std=0.01,
    ),
    n_eval=256,
    workers=1,
    md_steps=25000,
)
#: toy size (the code path, not quality): an AC curriculum of 2 + 1 two-step epochs, 64 samples and 4 ps of the
#: references; the wider noise spreads the untrained sampler's torsions so that C7eq holds samples (else Delta F is NaN)
ALDP_SMOKE = replace(
    ALDP_QUICK,
    sampler=replace(
        ALDP_QUICK.sampler,
        asbs=replace(
            ALDP_QUICK.sampler.asbs,
            stages="AC",
            adjoint_epochs=2,
            corrector_epochs=1,
            steps_per_epoch=2,
            new_samples=16,
            sde_steps=20,
            skip_epochs=0,
        ),
        sigma_max=0.2,
    ),
    n_eval=64,
    md_steps=2000,
    metad_frequency=100,
)

ALDP = Scenario(
    name="mol.wt_asbs.aldp",
    package="mol",
    method="wt_asbs",
    run=run_aldp,
    variants={"smoke": ALDP_SMOKE, "quick": ALDP_QUICK, "full": ALDP_FULL},
    directions={
        "evals": "min",
        "wall_s": "min",
        "basins": "max",
        "fes_rmse_vs_metad": "min",
        "hill_check_err": "min",
        "KL_phi": "min",
        "KL_psi": "min",
        "W2_phi_psi": "min",
    },
    tags=frozenset({"sampling", "free-energy", "openmm"}),
    description="alanine dipeptide (ff96/OBC1): WT-ASBS vs OpenMM WTMetaD and MD; quick = CPU sanity",
    # full: a guess (700k optimiser steps, OpenMM energies on its Reference platform, 2 x 5 ns of OpenMM MD)
    expected_seconds={"smoke": 6, "quick": 20, "full": 5400},
)
