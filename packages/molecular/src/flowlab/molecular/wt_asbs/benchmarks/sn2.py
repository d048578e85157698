"""Benchmark `mol.wt_asbs.sn2`: Cl- + CH3Cl on GFN2-xTB, WT-ASBS and ASBS vs well-tempered metadynamics and plain
Langevin; exact Delta F = 0 and an even PMF by symmetry."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np
import torch

from flowlab.core.bench import BenchContext, BenchResult, Curve, Scenario
from flowlab.molecular.wt_asbs.analysis import delta_f_from_pmf, delta_f_from_samples, fes_rmse, reweight
from flowlab.molecular.wt_asbs.asbs import ASBS, ASBSConfig, SamplerConfig
from flowlab.molecular.wt_asbs.benchmarks.common import CLIP_100_PER_ANGSTROM, WTASBSBench, sampler_seed
from flowlab.molecular.wt_asbs.bias import BiasConfig, WellTemperedBias
from flowlab.molecular.wt_asbs.reference import langevin
from flowlab.molecular.wt_asbs.sn2 import REACTANT, WELLS, reaction_cv, sn2_potential, well_fractions

__all__ = ["SN2", "SN2_FULL", "SN2_QUICK", "SN2Bench", "run_sn2"]


@dataclass(frozen=True)
class SN2Bench(WTASBSBench):
    """workers: tblite threads; grid_range: the bias grids' range of xi (nm); the Langevin references: `walkers`
    walkers from the reactant complex, md_steps steps of md_dt (the first tenth burn-in), WTMetaD depositing md_bias
    hills every md_deposit_every steps; pmf_cutoff (kT): where PMFs are compared."""

    workers: int
    grid_range: tuple[float, float]
    walkers: int
    md_steps: int
    md_dt: float
    md_bias: BiasConfig
    md_deposit_every: int
    pmf_cutoff: float


def _sn2_row(pot, x: torch.Tensor, weights: torch.Tensor | None, *, evals: int, wall: float, e_min: float):
    """Metrics of samples x: (N, 18) with optional weights (N,): wells visited, product share, Delta F error,
    median energy above the minimum (kT; from at most 256 samples, not counted in `evals`), SCF failures."""
    xi = reaction_cv()(x).ravel()
    visited = well_fractions(xi)
    sub = x[torch.linspace(0, len(x) - 1, min(len(x), 256)).long()]
    return {
        "basins": float(sum(v >= 0.01 for v in visited.values())),
        "product_share": well_fractions(xi, weights)["product"],
        "dF_err": abs(delta_f_from_samples(xi, WELLS["reactant"], WELLS["product"], weights=weights)),
        "median_excess_energy_kT": float((pot.energy_and_forces(sub).energy.nanmedian() - e_min) / pot.kT),
        "evals": float(evals),
        "wall_s": wall,
    }


def _pmf_asymmetry(f: torch.Tensor, nodes: torch.Tensor, *, cutoff: float) -> float:
    """RMSE (kT) between F(xi) and F(-xi) on the nodes where F <= cutoff. f, nodes: (G,), nodes symmetric about 0."""
    if not torch.allclose(nodes, -nodes.flip(0), atol=1e-9):
        raise ValueError("nodes: expected a grid symmetric about 0")
    keep = (f <= cutoff) & (f.flip(0) <= cutoff)
    return float(((f - f.flip(0))[keep] ** 2).mean().sqrt())


def _bias_pmf_metrics(bias: WellTemperedBias, kT: float) -> tuple[torch.Tensor, dict[str, float]]:
    """F / kT on the bias grid nodes: (G,), and Delta F error from F."""
    nodes, f = bias.nodes[0], bias.free_energy() / kT
    return f, {"dF_err_bias": abs(delta_f_from_pmf(f, nodes, WELLS["reactant"], WELLS["product"]))}


def run_sn2(ctx: BenchContext) -> BenchResult:
    """WTMetaD (the reference) and plain Langevin, walkers in the reactant well, then WT-ASBS and ASBS (source at the
    reactant complex), all on GFN2-xTB + walls at 300 K. The reaction is its own mirror image: exact Delta F = 0.

    Per method: basins (wells holding >= 1 % of the unweighted samples), product_share (weighted), dF_err (|Delta F|
    from samples reweighted by the final bias, kT), median_excess_energy_kT (about 6 kT for Boltzmann samples: 12
    internal modes), evals, wall_s, scf_retried / scf_failed. WTMetaD and WT-ASBS add dF_err_bias (from F =
    -gamma/(gamma-1) V); WTMetaD pmf_asymmetry (RMSE of F(xi) - F(-xi), kT) and barrier_kT; WT-ASBS
    pmf_rmse_vs_metad (after the best shift, where the reference F <= pmf_cutoff) and hills.
    """
    cfg: SN2Bench = ctx.config
    pot = sn2_potential(workers=cfg.workers)
    kT, cv = pot.kT, reaction_cv()
    e_min = float(pot.energy_and_forces(REACTANT).energy[0])
    out: dict[str, dict[str, float]] = {}

    def counted(run):
        pot.n_evals = pot.base.n_retried = pot.base.n_failed = 0
        row = run()
        row.update(scf_retried=float(pot.n_retried), scf_failed=float(pot.n_failed))
        return row

    def md(bias):
        res = langevin(
            pot, REACTANT.repeat(cfg.walkers, 1), steps=cfg.md_steps, dt=cfg.md_dt, generator=ctx.generator,
            cvs=cv if bias else None, bias=bias, deposit_every=cfg.md_deposit_every, record_every=10,
            burn_in=cfg.md_steps // 10,
        )  # fmt: skip
        w = reweight(bias(cv(res.samples)).value, kT) if bias is not None else None
        return _sn2_row(pot, res.samples, w, evals=res.energy_evals, wall=res.seconds, e_min=e_min)

    metad = cfg.md_bias.build(*cfg.grid_range, kT=kT)
    out["WTMetaD (Langevin)"] = counted(lambda: md(metad))
    reference, extra = _bias_pmf_metrics(metad, kT)
    nodes = metad.nodes[0]
    well = reference[(nodes >= WELLS["reactant"][0]) & (nodes <= WELLS["reactant"][1])].min()
    extra.update(
        pmf_asymmetry=_pmf_asymmetry(reference, nodes, cutoff=cfg.pmf_cutoff),
        barrier_kT=float(np.interp(0.0, nodes.numpy(), reference.numpy()) - well),
    )
    out["WTMetaD (Langevin)"].update(extra)
    out["Langevin MD"] = counted(lambda: md(None))
    pmfs = {"WTMetaD (Langevin)": (nodes.tolist(), reference.clamp(max=25).tolist())}

    def asbs(bias):
        seed = sampler_seed(ctx.generator)
        model = ASBS.from_config(
            pot, cfg.sampler, source_mean=REACTANT[0].float(), cvs=cv if bias else None, bias=bias, atom_dim=3,
            generator=torch.Generator().manual_seed(seed),
        )  # fmt: skip
        start = time.perf_counter()
        model.train()
        _, x1 = model.sample(cfg.n_eval)
        wall, evals, x1 = time.perf_counter() - start, pot.n_evals, x1.double()
        w = reweight(bias(cv(x1)).value, kT) if bias is not None else None
        return _sn2_row(pot, x1, w, evals=evals, wall=wall, e_min=e_min)

    wt = cfg.sampler.bias.build(*cfg.grid_range, kT=kT)
    ours = counted(lambda: asbs(wt))
    f, extra = _bias_pmf_metrics(wt, kT)
    ours.update(extra, pmf_rmse_vs_metad=fes_rmse(f, reference, cutoff=cfg.pmf_cutoff), hills=float(wt.n_hills))
    pmfs["WT-ASBS"] = (nodes.tolist(), f.clamp(max=25).tolist())
    out["ASBS"] = counted(lambda: asbs(None))
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
SN2_FULL = replace(
    SN2_QUICK,
    sampler=replace(
        SN2_QUICK.sampler,
        asbs=replace(SN2_QUICK.sampler.asbs, stages="ACACACACA", adjoint_epochs=200, steps_per_epoch=100),
    ),
    n_eval=4096,
    walkers=16,
    md_steps=30000,
)

SN2 = Scenario(
    name="mol.wt_asbs.sn2",
    package="mol",
    method="wt_asbs",
    run=run_sn2,
    variants={"smoke": SN2_SMOKE, "quick": SN2_QUICK, "full": SN2_FULL},
    directions={
        "dF_err": "min",
        "dF_err_bias": "min",
        "basins": "max",
        "evals": "min",
        "wall_s": "min",
        "pmf_rmse_vs_metad": "min",
    },
    tags=frozenset({"sampling", "free-energy", "tblite"}),
    description="Cl- + CH3Cl SN2 on GFN2-xTB (xi = d(C-Cl_a) - d(C-Cl_b)): WT-ASBS vs ASBS, WTMetaD and Langevin",
    # full: a guess, dominated by about 1M GFN2-xTB calls on the CPU (2 x 16 walkers x 30k Langevin steps)
    expected_seconds={"smoke": 3, "quick": 100, "full": 2400},
)
