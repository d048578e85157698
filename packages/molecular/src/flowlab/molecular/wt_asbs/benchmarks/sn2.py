"""Benchmark `mol.wt_asbs.sn2`: Cl- + CH3Cl on GFN2-xTB, WT-ASBS and ASBS vs well-tempered metadynamics and plain
Langevin; exact Delta F = 0 and an even PMF by symmetry."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

import torch

from flowlab.core.bench import BenchContext, BenchResult, Curve, Scenario
from flowlab.molecular.wt_asbs.analysis import fes_rmse
from flowlab.molecular.wt_asbs.asbs import ASBSConfig, SamplerConfig
from flowlab.molecular.wt_asbs.benchmarks.common import CLIP_100_PER_ANGSTROM, WTASBSBench
from flowlab.molecular.wt_asbs.benchmarks.sn2_runs import md_row, pmf_row, reference_row, sampler_rows
from flowlab.molecular.wt_asbs.bias import BiasConfig
from flowlab.molecular.wt_asbs.sn2 import NUMBERS, REACTANT, WALL_NM, sn2_potential
from flowlab.molecular.wt_asbs.sn2_reference import SN2ReferenceConfig, reference_artifact
from flowlab.molecular.wt_asbs.trajectories import element_topology, write_trajectory

__all__ = ["SN2", "SN2_CPU", "SN2_FULL", "SN2_QUICK", "SN2Bench", "run_sn2"]


@dataclass(frozen=True)
class SN2Bench(WTASBSBench):
    """workers: tblite threads; grid_range: the bias grids' range of xi (nm); the Langevin runs: `walkers` walkers
    from the reactant complex, md_steps steps of md_dt (the first tenth burn-in), WTMetaD depositing md_bias hills
    every md_deposit_every steps; pmf_cutoff (kT): where PMFs are compared; coordinates: the samplers' space
    (Cartesian, D = 18, or `sn2.internal_system`'s d = 12 with the reactant at z_0 = -reaction_units and the source's
    std along z_0 `cv_source_std`); reference: a converged WTMetaD run built once and cached (else WTMetaD runs here
    for md_steps); wall_nm, wall_k: the C-Cl walls of `sn2_potential`."""

    workers: int
    grid_range: tuple[float, float]
    walkers: int
    md_steps: int
    md_dt: float
    md_bias: BiasConfig
    md_deposit_every: int
    pmf_cutoff: float
    coordinates: Literal["cartesian", "internal"] = "cartesian"
    reaction_units: float = 2.0
    cv_source_std: float = 1.0
    reference: SN2ReferenceConfig | None = None
    wall_nm: float = WALL_NM
    wall_k: float = 5000.0


def run_sn2(ctx: BenchContext) -> BenchResult:
    """The WTMetaD reference (cached, or Cartesian multiple-walker WTMetaD here) and plain Langevin, walkers in the
    reactant well, then WT-ASBS and ASBS (source at the reactant complex), all on GFN2-xTB + walls at 300 K. The
    reaction is its own mirror image: exact Delta F = 0.

    Per method: basins (wells holding >= 1 % of the unweighted samples), product_share (weighted), dF_err (|Delta F|
    from samples reweighted by the final bias, kT), median_excess_energy_kT (about 6 kT for Boltzmann samples: 12
    internal modes), evals, wall_s, scf_retried / scf_failed; the samplers their epochs and stopped_diverging.
    WTMetaD and WT-ASBS add, from their PMF F = -gamma/(gamma-1) V: dF_err_bias, barrier_kT and pmf_asymmetry (RMSE
    of F(xi) - F(-xi), kT); the cached reference its drift over the last half of its snapshots; WT-ASBS
    pmf_rmse_vs_metad (after the best shift, where the reference F <= pmf_cutoff), barrier_err_kT and hills. WT-ASBS's
    samples go to `wt_asbs_sn2_samples.xyz`.
    """
    cfg: SN2Bench = ctx.config
    pot = sn2_potential(workers=cfg.workers, wall_nm=cfg.wall_nm, wall_k=cfg.wall_k)
    e_min = float(pot.energy_and_forces(REACTANT).energy[0])

    def counted(run):
        pot.n_evals = pot.base.n_retried = pot.base.n_failed = 0
        out = run()
        row = out[0] if isinstance(out, tuple) else out
        row.update(scf_retried=float(pot.n_retried), scf_failed=float(pot.n_failed))
        return out

    metad, reference, nodes = counted(lambda: reference_row(cfg, ctx, pot, e_min=e_min))
    md_out, md = counted(lambda: md_row(cfg, ctx, pot, None, e_min=e_min))
    out = {"WTMetaD (Langevin)": metad, "Langevin MD": md_out}
    pmfs = {"WTMetaD (Langevin)": (nodes.tolist(), reference.clamp(max=25).tolist())}
    runs = sampler_rows(
        cfg, ctx, pot, e_min=e_min, counted=counted, md=md, md_evals=int(md_out["evals"]), md_wall=md_out["wall_s"]
    )
    ours, run = runs["WT-ASBS"]
    bias = run["model"].bias
    f = bias.free_energy() / pot.kT
    ours.update(pmf_row(f, bias.nodes[0], cutoff=cfg.pmf_cutoff))
    ours.update(
        pmf_rmse_vs_metad=fes_rmse(f, reference, cutoff=cfg.pmf_cutoff), hills=float(bias.n_hills),
        barrier_err_kT=abs(ours["barrier_kT"] - metad["barrier_kT"]),
    )  # fmt: skip
    pmfs["WT-ASBS"] = (bias.nodes[0].tolist(), f.clamp(max=25).tolist())
    out["ASBS"] = runs["ASBS"][0]
    ctx.out_dir.mkdir(parents=True, exist_ok=True)
    write_trajectory(
        run["x"].float(), ctx.out_dir / "wt_asbs_sn2_samples.xyz", topology=element_topology(NUMBERS, "SN2")
    )
    curve = Curve(title="SN2 PMF along d(C-Cl_a) - d(C-Cl_b)", xlabel="xi (nm)", ylabel="F / kT", lines=pmfs)
    return BenchResult(metrics=ours, baselines=out, curves=[curve])


SN2_QUICK = SN2Bench(
    sampler=SamplerConfig(
        asbs=ASBSConfig(
            stages="ACACA",
            adjoint_epochs=30,
            corrector_epochs=6,
            steps_per_epoch=30,
            batch_size=64,
            new_samples=64,
            buffer_size=512,
            sde_steps=50,
            skip_epochs=5,
            lr=1e-3,
            force_clip=CLIP_100_PER_ANGSTROM,
        ),
        bias=BiasConfig(bins=150, sigma=0.01, height=0.5, bias_factor=10.0),
        sigma_max=0.03,
        sigma_min=1e-4,
        source_std=0.003,
    ),
    n_eval=512,
    workers=2,
    grid_range=(-0.3, 0.3),
    walkers=8,
    md_steps=3000,
    md_dt=2e-6,
    md_bias=BiasConfig(bins=150, sigma=0.01, height=3.0, bias_factor=10.0),
    md_deposit_every=10,
    pmf_cutoff=20.0,
)
#: toy size (the code path, not quality): 2 walkers x 40 steps, an AC curriculum of 2 + 1 two-step epochs
SN2_SMOKE = replace(
    SN2_QUICK,
    sampler=replace(
        SN2_QUICK.sampler,
        asbs=replace(
            SN2_QUICK.sampler.asbs,
            stages="AC",
            adjoint_epochs=2,
            corrector_epochs=1,
            steps_per_epoch=2,
            new_samples=8,
            sde_steps=20,
            skip_epochs=0,
        ),
    ),
    n_eval=16,
    walkers=2,
    md_steps=40,
)
#: internal coordinates on 2 CPU cores (issue 38): the samplers on `sn2.internal_system`'s z (d = 12) with the
#: source wide along the reaction line, warm-started by bridge matching on the plain MD's reactant-well samples, a CV
#: wall inside the bias grid's ends, and the cached converged WTMetaD reference; a sampler whose new samples stay over
#: 100 kT above its best epoch's for 20 adjoint epochs is stopped as diverged (plain ASBS ran away to 644 kT)
SN2_CPU = replace(
    SN2_QUICK,
    sampler=SamplerConfig(
        asbs=ASBSConfig(
            stages="ACACACACA",
            adjoint_epochs=300,
            corrector_epochs=100,
            steps_per_epoch=30,
            batch_size=128,
            new_samples=128,
            buffer_size=2048,
            sde_steps=50,
            skip_epochs=5,
            lr=1e-3,
            force_clip=50.0,
            warm_start_steps=3000,
            warm_start_lr=3e-3,
            stop_above_kT=100.0,
            stop_patience=20,
        ),
        bias=BiasConfig(bins=150, sigma=0.01, height=0.03, bias_factor=5.0, walls=((-0.2, 0.2),)),
        sigma_max=1.5,
        sigma_min=1e-3,
        source_std=0.1,
    ),
    n_eval=2048,
    md_steps=5000,
    coordinates="internal",
    reaction_units=2.0,
    cv_source_std=1.0,
    reference=SN2ReferenceConfig(),
    wall_nm=0.32,
    wall_k=5e4,
)
#: toy size of the cpu variant's code path: internal coordinates, a 2-step warm start and a cached tiny reference (8
#: walkers x 200 steps)
SN2_CPU_SMOKE = replace(
    SN2_CPU,
    sampler=replace(SN2_CPU.sampler, asbs=replace(SN2_SMOKE.sampler.asbs, warm_start_steps=2)),
    n_eval=16,
    walkers=2,
    md_steps=40,
    reference=SN2ReferenceConfig(walkers=8, steps=200, fes_every=100),
)

#: GPU-sized (untested here): the cpu variant's system and reference with a five times longer curriculum, 512 new
#: samples per epoch, 3x256 MLPs and 16 tblite workers (GFN2-xTB runs on the CPU cores: about 3.8M energy calls)
SN2_FULL = replace(
    SN2_CPU,
    sampler=replace(
        SN2_CPU.sampler,
        asbs=replace(
            SN2_CPU.sampler.asbs,
            adjoint_epochs=1500,
            corrector_epochs=500,
            steps_per_epoch=50,
            batch_size=512,
            new_samples=512,
            buffer_size=8192,
            hidden=(256, 256, 256),
        ),
    ),
    n_eval=8192,
    workers=16,
    walkers=16,
    md_steps=30000,
)


def _requires(cfg: SN2Bench, device: torch.device) -> tuple:
    """The cached WTMetaD reference of a variant that has one."""
    return () if cfg.reference is None else (reference_artifact(cfg.reference),)


SN2 = Scenario(
    name="mol.wt_asbs.sn2",
    package="mol",
    method="wt_asbs",
    run=run_sn2,
    variants={"smoke": SN2_CPU_SMOKE, "quick": SN2_QUICK, "cpu": SN2_CPU, "full": SN2_FULL},
    directions={
        "dF_err": "min",
        "dF_err_bias": "min",
        "basins": "max",
        "evals": "min",
        "wall_s": "min",
        "pmf_rmse_vs_metad": "min",
        "barrier_err_kT": "min",
        "pmf_asymmetry": "min",
    },
    tags=frozenset({"sampling", "free-energy", "tblite"}),
    description="Cl- + CH3Cl SN2 on GFN2-xTB (xi = d(C-Cl_a) - d(C-Cl_b)): WT-ASBS vs ASBS, WTMetaD and Langevin",
    # cpu: seed 1 of three side by side took 6913 s, its plain ASBS baseline running away (RESULTS.md); full: a guess
    # for 16 cores, dominated by about 4M GFN2-xTB calls (the two samplers and 16 x 30k Langevin steps)
    expected_seconds={"smoke": 5, "quick": 100, "cpu": 7000, "full": 3600},
    requires=_requires,
)
