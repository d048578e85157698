"""Benchmark `mol.wt_asbs.aldp`: alanine dipeptide (ff96/OBC1), WT-ASBS vs plain ASBS, OpenMM well-tempered
metadynamics and plain MD on the same energy.

Metrics: Delta F (kJ/mol) of C7ax/aR/aL relative to C7eq (from e^{V/kT}-reweighted samples and from the bias),
basins visited, energy calls, the FES RMSE of the bias estimate and KL(phi), KL(psi), W2(phi, psi) against the
WTMetaD FES (ASBS Table 3's metrics, the published numbers beside them); both FES plotted to
`wt_asbs_aldp_fes.png`, the samples written to `wt_asbs_aldp_samples.dcd`. The `cpu` variant samples internal
coordinates (d = 60) and scores against a converged 5 ns WTMetaD reference built once (`aldp_reference`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

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
)
from flowlab.molecular.wt_asbs.aldp_reference import (
    ReferenceConfig,
    reference_artifact,
)
from flowlab.molecular.wt_asbs.analysis import reweight
from flowlab.molecular.wt_asbs.asbs import ASBSConfig, SamplerConfig
from flowlab.molecular.wt_asbs.benchmarks.aldp_runs import hill_check, path_estimate, reference, run_sampler
from flowlab.molecular.wt_asbs.benchmarks.aldp_scores import bias_fes, df_error, evals_to_match, torsion_scores
from flowlab.molecular.wt_asbs.benchmarks.common import CLIP_100_PER_ANGSTROM, WTASBSBench, sampler_seed
from flowlab.molecular.wt_asbs.bias import BiasConfig
from flowlab.molecular.wt_asbs.plots import plot_fes
from flowlab.molecular.wt_asbs.potentials import OpenMMPotential
from flowlab.molecular.wt_asbs.reference import openmm_md
from flowlab.molecular.wt_asbs.trajectories import write_trajectory

__all__ = ["ALDP", "ALDP_CPU", "ALDP_FULL", "ALDP_QUICK", "AldpBench", "run_aldp"]


@dataclass(frozen=True)
class AldpBench(WTASBSBench):
    """solvent: OpenMM implicit solvent; workers: OpenMM contexts evaluating the sampler's energies; md_steps: 2 fs
    steps of plain MD (and of the in-run WTMetaD without a `reference`); metad_height (kJ/mol), metad_frequency
    (steps): the in-run WTMetaD's hills (its grid and bias factor are the sampler's bias's); coordinates: the
    sampler's space (Cartesian, D = 66, or internal, d = 60, phi and psi at `torsion_scale` rad per unit, the
    source's std along them `cv_source_std` where given, the sampler's `source_std` elsewhere);
    reference: a converged WTMetaD run built once and cached (else WTMetaD runs in the same process for md_steps);
    asbs_baseline: train plain ASBS with the same settings in the same run."""

    solvent: str | None
    workers: int
    md_steps: int
    metad_height: float
    metad_frequency: int
    coordinates: Literal["cartesian", "internal"] = "cartesian"
    torsion_scale: float = 1.0
    cv_source_std: float | None = None
    reference: ReferenceConfig | None = None
    asbs_baseline: bool = False


def run_aldp(ctx: BenchContext) -> BenchResult:
    """Train WT-ASBS (and, with `asbs_baseline`, plain ASBS) on alanine dipeptide (the shared prmtop/inpcrd), take
    the WTMetaD reference (cached or run here) and plain OpenMM MD, and score them all: basins, ESS, basin free
    energies against the reference, the bias FES and the (phi, psi) marginals' KL and W2."""
    cfg: AldpBench = ctx.config
    prmtop = require_file(ctx.data_root, DATASET, PRMTOP)
    inpcrd = require_file(ctx.data_root, DATASET, INPCRD)
    pot = OpenMMPotential(prmtop, solvent=cfg.solvent, workers=cfg.workers, platform="Reference")
    kT = pot.kT
    x_ref = pot.positions(inpcrd).float()
    seed = sampler_seed(ctx.generator)
    ref = reference(cfg, ctx, prmtop, inpcrd)
    df_ref = basin_df_from_fes(ref.fes, kT)
    run = run_sampler(cfg, pot, x_ref, seed, wt=True)
    bias, log, s = run["model"].bias, run["log"], run["phi_psi"]
    w = reweight(bias(s).value, kT)
    phi_psi = s.numpy()
    f_ours = bias_fes(bias, ref.fes.shape[0])
    ours = {
        "evals": float(run["evals"]),
        "wall_s": run["wall"],
        "basins": basins_visited(phi_psi),
        "bias_max_kjmol": float(bias.values.max()),
        "hills": float(bias.n_hills),
        "hill_check_err": hill_check(bias, s[:8], cfg.sampler.bias.sigma),
        "ess_frac": float(1 / (w**2).sum()) / len(w),
        "bias_grew": float(all(b2 >= b1 for b1, b2 in zip(log.max_bias, log.max_bias[1:], strict=False))),
    }
    ours.update(basin_df_from_samples(phi_psi, w.numpy(), kT))
    ours.update({f"dF_bias_{k[3:]}": v for k, v in basin_df_from_fes(f_ours, kT).items()})
    ours["dF_err_kT"] = df_error(ours, df_ref, kT)
    ours["dF_bias_err_kT"] = df_error(ours, df_ref, kT, prefix="dF_bias_")
    if run["path_w"] is not None:
        ours.update(path_estimate(run, kT))
        ours["dF_path_err_kT"] = df_error(ours, df_ref, kT, prefix="dF_path_")
    # FES RMSE (kT) of the bias estimate against the reference FES on its visited region (< 20 kT)
    f_meta = ref.fes - ref.fes.min()
    diff = (f_ours - f_meta)[f_meta < 20 * kT] / kT
    ours["fes_rmse_vs_metad"] = float(np.sqrt(np.mean((diff - diff.mean()) ** 2)))
    ours.update(torsion_scores(ref.fes, kT, phi_psi, w.numpy()))
    metad = {"evals": float(ref.energy_evals), "wall_s": ref.seconds, "basins": basins_visited(ref.cvs), **df_ref}
    if cfg.reference is not None:
        conv = ref.convergence(kT)
        half = len(conv["steps"]) // 2
        metad["dF_drift_last_half_kjmol"] = max(float(np.ptp(v[half:])) for k, v in conv.items() if k != "steps")
        metad["evals_to_match_ours"] = evals_to_match(ref, kT, ours["dF_err_kT"])
        metad["evals_to_match_ours_bias"] = evals_to_match(ref, kT, ours["dF_bias_err_kT"])
    baselines = {"WTMetaD (OpenMM)": metad}
    if cfg.asbs_baseline:
        plain_run = run_sampler(cfg, pot, x_ref, seed, wt=False)
        pp = plain_run["phi_psi"].numpy()
        plain_asbs = {"evals": float(plain_run["evals"]), "wall_s": plain_run["wall"], "basins": basins_visited(pp)}
        plain_asbs.update(basin_df_from_samples(pp, None, kT))
        plain_asbs["dF_err_kT"] = df_error(plain_asbs, df_ref, kT)
        if plain_run["path_w"] is not None:
            plain_asbs.update(path_estimate(plain_run, kT))
            plain_asbs["dF_path_err_kT"] = df_error(plain_asbs, df_ref, kT, prefix="dF_path_")
        plain_asbs.update(torsion_scores(ref.fes, kT, pp))
        baselines["ASBS"] = plain_asbs
    md = openmm_md(prmtop, inpcrd, steps=cfg.md_steps, solvent=cfg.solvent, seed=ctx.seed)
    plain = {"evals": float(md.energy_evals), "wall_s": md.seconds, "basins": basins_visited(md.cvs)}
    plain.update(basin_df_from_samples(md.cvs, None, kT))
    plain.update(torsion_scores(ref.fes, kT, md.cvs))
    baselines["Langevin MD (OpenMM)"] = plain
    ctx.out_dir.mkdir(parents=True, exist_ok=True)
    fes_png = ctx.out_dir / "wt_asbs_aldp_fes.png"
    plot_fes(fes_png, {"WT-ASBS (bias)": f_ours, "WTMetaD (OpenMM)": f_meta}, kT)
    write_trajectory(run["x"].float(), ctx.out_dir / "wt_asbs_aldp_samples.dcd", topology=pot.topology)
    refs = {"ASBS [paper, internal coords, d=60]": {"KL_phi": 0.02, "KL_psi": 0.01, "W2_phi_psi": 0.25}}
    curve = Curve(
        title="WT-ASBS max bias (kJ/mol) per epoch",
        xlabel="energy evaluations",
        ylabel="max V",
        lines={"WT-ASBS": ([float(e) for e in log.energy_evals], log.max_bias)},
    )
    return BenchResult(metrics=ours, baselines=baselines, references=refs, plots=[fes_png], curves=[curve])


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
#: internal coordinates on 2 CPU cores (issue 38): WT-ASBS and plain ASBS (23-24 min each with three seeds sharing
#: two cores), against the converged 5 ns WTMetaD reference (built once, about 8 minutes) and 0.5 ns of plain MD
ALDP_CPU = replace(
    ALDP_QUICK,
    sampler=SamplerConfig(
        asbs=ASBSConfig(
            stages="ACACACACA",
            adjoint_epochs=300,
            corrector_epochs=100,
            steps_per_epoch=50,
            batch_size=256,
            new_samples=256,
            buffer_size=4096,
            sde_steps=100,
            skip_epochs=10,
            lr=1e-3,
            force_clip=50.0,
            hidden=(128, 128, 128),
        ),
        bias=BiasConfig(bins=150, sigma=0.2, height=0.01, bias_factor=8.0),
        sigma_max=1.5,
        sigma_min=1e-3,
        source_std=0.1,
    ),
    n_eval=8192,
    md_steps=250_000,
    coordinates="internal",
    cv_source_std=1.0,
    reference=ReferenceConfig(),
    asbs_baseline=True,
)


#: toy size (the code path, not quality) of the cpu variant's: internal coordinates, plain ASBS beside WT-ASBS and a
#: cached 4 ps WTMetaD reference; an AC curriculum of 2 + 1 two-step epochs, 128 samples and 4 ps of plain MD; phi
#: and psi at 3 rad per unit, so that the untrained sampler spreads them into C7eq (else Delta F is NaN)
ALDP_SMOKE = replace(
    ALDP_CPU,
    sampler=replace(
        ALDP_CPU.sampler,
        asbs=replace(
            ALDP_CPU.sampler.asbs,
            stages="AC",
            adjoint_epochs=2,
            corrector_epochs=1,
            steps_per_epoch=2,
            new_samples=16,
            sde_steps=20,
            skip_epochs=0,
            hidden=(32, 32),
        ),
    ),
    n_eval=128,
    md_steps=2000,
    torsion_scale=3.0,
    reference=ReferenceConfig(steps=2000, fes_every=1000),
)


def _requires(cfg: AldpBench, device: torch.device) -> tuple:
    """The cached WTMetaD reference of a variant that has one (none where the data set is missing: the run then
    reports the missing file)."""
    if cfg.reference is None:
        return ()
    try:
        return (reference_artifact(cfg.reference),)
    except FileNotFoundError:
        return ()


ALDP = Scenario(
    name="mol.wt_asbs.aldp",
    package="mol",
    method="wt_asbs",
    run=run_aldp,
    variants={"smoke": ALDP_SMOKE, "quick": ALDP_QUICK, "cpu": ALDP_CPU, "full": ALDP_FULL},
    directions={
        "evals": "min",
        "wall_s": "min",
        "basins": "max",
        "fes_rmse_vs_metad": "min",
        "hill_check_err": "min",
        "KL_phi": "min",
        "KL_psi": "min",
        "W2_phi_psi": "min",
        "dF_err_kT": "min",
        "dF_bias_err_kT": "min",
        "dF_path_err_kT": "min",
    },
    tags=frozenset({"sampling", "free-energy", "openmm"}),
    description="alanine dipeptide (ff96/OBC1): WT-ASBS vs ASBS, OpenMM WTMetaD and MD; quick = CPU sanity, cpu = "
    "internal coordinates on 2 cores",
    # full: a guess (700k optimiser steps, OpenMM energies on its Reference platform, 2 x 5 ns of OpenMM MD)
    expected_seconds={"smoke": 6, "quick": 20, "cpu": 1800, "full": 5400},
    requires=_requires,
)
