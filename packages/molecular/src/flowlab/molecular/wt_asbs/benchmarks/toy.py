"""Benchmark `mol.wt_asbs.toy`: Mueller-Brown and four-well (and, in full, four-well in 5-D), exact PMFs along x by
quadrature; WT-ASBS vs ASBS vs well-tempered metadynamics / plain overdamped Langevin on the same energy.

Metrics per system `<sys>/...`: pmf_rmse (k_BT, populated range: exact F <= 6 k_BT), dF_err (|Delta F_AB| error in
k_BT between the CV intervals A and B), basins (basins found in 2-D), evals (energy evaluations, the samples' weights
included), wall_s. The samplers' PMF and Delta F come from their samples with path-space importance weights
(`ASBS.sample_weighted`, consistent whatever the sampler learnt; `ess_frac` their effective sample size over N).
WT-ASBS also reports the spec's estimators: `*_bias` from F = -gamma/(gamma-1) V and `*_rw` from the exp(V/kT)
reweighted histogram (exact only for a converged sampler); ASBS its unweighted `dF_err_raw`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Literal

import torch

from flowlab.core.bench import BenchContext, BenchResult, Claim, Curve, Scenario, parallel_map, seeded_worker
from flowlab.molecular.wt_asbs.analysis import (
    basin_coverage,
    delta_f_from_pmf,
    delta_f_from_samples,
    fes_rmse,
    pmf_from_samples,
    pmf_quadrature,
    reweight,
)
from flowlab.molecular.wt_asbs.asbs import ASBS, ASBSConfig, SamplerConfig
from flowlab.molecular.wt_asbs.benchmarks.common import WTASBSBench, sampler_seed
from flowlab.molecular.wt_asbs.bias import BiasConfig
from flowlab.molecular.wt_asbs.reference import langevin
from flowlab.molecular.wt_asbs.toys import TOY_INTERVALS, TOYS, make_toy, toy_bias, toy_cvs, toy_source_mean

__all__ = ["TOY", "TOY_FULL", "TOY_QUICK", "ToyBench", "run_toy"]


@dataclass(frozen=True)
class ToyBench(WTASBSBench):
    """systems: the toys, one process each up to `workers`; asbs_by_system: a toy's own curriculum in place of
    `sampler.asbs`; pmf_bins: PMF bins along x. The Langevin references: `walkers` walkers from the first minimum,
    md_steps steps of md_dt (the first tenth burn-in), a record every md_record_every steps; WTMetaD deposits
    md_bias hills every md_deposit_every steps."""

    systems: tuple[Literal["mueller-brown", "four-well", "four-well-5d"], ...]
    workers: int
    asbs_by_system: Mapping[str, ASBSConfig]
    pmf_bins: int
    walkers: int
    md_steps: int
    md_dt: float
    md_bias: BiasConfig
    md_deposit_every: int
    md_record_every: int

    def __post_init__(self) -> None:
        super().__post_init__()
        unknown = sorted(set(self.asbs_by_system) - set(TOYS))
        if unknown:
            raise ValueError(f"asbs_by_system: unknown system(s) {unknown}; expected some of {TOYS}")

    def sampler_for(self, system: str) -> SamplerConfig:
        """The sampler settings of toy `system`: `sampler` with its curriculum from `asbs_by_system` if listed."""
        return replace(self.sampler, asbs=self.asbs_by_system.get(system, self.sampler.asbs))


def _run_one_toy(name: str, cfg: ToyBench, ctx: BenchContext):
    pot = make_toy(name)
    (lo, hi), _ = pot.box
    edges = torch.linspace(lo, hi, cfg.pmf_bins + 1, dtype=torch.float64)
    centres = 0.5 * (edges[1:] + edges[:-1])
    exact = pmf_quadrature(make_toy(name.replace("-5d", "")).energy, pot.box, centres)
    a, b = TOY_INTERVALS[name]
    df_exact = delta_f_from_pmf(exact, centres, a, b)
    cvs, mean, sampler = toy_cvs(pot), toy_source_mean(pot), cfg.sampler_for(name)
    out, pmfs = {}, {"exact": exact}

    def summarise(x, pmf, df, evals, wall, extra=None):
        found, _ = basin_coverage(x, pot.minima, pot.basin_radius)
        m = {
            f"{name}/pmf_rmse": fes_rmse(pmf, exact),
            f"{name}/dF_err": abs(df - df_exact),
            f"{name}/basins": float(found),
            f"{name}/evals": float(evals),
            f"{name}/wall_s": wall,
        }
        m.update({f"{name}/{k}": v for k, v in (extra or {}).items()})
        return m

    for method in ("WT-ASBS", "ASBS"):
        pot.n_evals = 0
        bias = toy_bias(pot, sampler.bias) if method == "WT-ASBS" else None
        seed = sampler_seed(ctx.generator)
        model = ASBS.from_config(
            pot,
            sampler,
            source_mean=mean,
            cvs=cvs if bias else None,
            bias=bias,
            generator=torch.Generator().manual_seed(seed),
        )
        start = time.perf_counter()
        model.train()
        _, x1, log_w = model.sample_weighted(cfg.n_eval)
        wall = time.perf_counter() - start
        s = x1[:, 0].double()
        w = torch.softmax(log_w, 0)
        pmf = pmf_from_samples(s, edges, weights=w)
        pmfs[f"{method} (path weights)"] = pmf
        extra = {"ess_frac": float(1 / (w**2).sum()) / len(w)}
        if bias is not None:
            w_rw = reweight(bias(s[:, None]).value, 1.0)
            pmf_bias = bias.free_energy(centres[:, None])
            pmf_rw = pmf_from_samples(s, edges, weights=w_rw)
            pmfs["WT-ASBS (bias)"], pmfs["WT-ASBS (exp(V) reweighted)"] = pmf_bias, pmf_rw
            extra.update(
                {
                    "pmf_rmse_bias": fes_rmse(pmf_bias, exact),
                    "dF_err_bias": abs(delta_f_from_pmf(pmf_bias, centres, a, b) - df_exact),
                    "pmf_rmse_rw": fes_rmse(pmf_rw, exact),
                    "dF_err_rw": abs(delta_f_from_samples(s, a, b, weights=w_rw) - df_exact),
                    "ess_frac_rw": float(1 / (w_rw**2).sum()) / len(w_rw),
                }
            )
        else:
            extra["dF_err_raw"] = abs(delta_f_from_samples(s, a, b) - df_exact)
        out[method] = summarise(x1, pmf, delta_f_from_samples(s, a, b, weights=w), pot.n_evals, wall, extra)

    walkers = torch.tensor(pot.minima[0], dtype=torch.float64).repeat(cfg.walkers, 1)
    walkers = torch.cat([walkers, torch.zeros(cfg.walkers, pot.dim - 2, dtype=torch.float64)], 1)
    for method in ("WTMetaD (Langevin)", "Langevin MD"):
        pot.n_evals = 0
        bias = toy_bias(pot, cfg.md_bias) if method.startswith("WTMetaD") else None
        res = langevin(
            pot,
            walkers,
            steps=cfg.md_steps,
            dt=cfg.md_dt,
            generator=ctx.generator,
            cvs=cvs if bias else None,
            bias=bias,
            deposit_every=cfg.md_deposit_every,
            record_every=cfg.md_record_every,
            burn_in=cfg.md_steps // 10,
        )
        s = res.samples[:, 0]
        if bias is not None:
            pmf = bias.free_energy(centres[:, None])
            df = delta_f_from_pmf(pmf, centres, a, b)
        else:
            pmf, df = pmf_from_samples(s, edges), delta_f_from_samples(s, a, b)
        pmfs[method] = pmf
        out[method] = summarise(res.samples, pmf, df, res.energy_evals, res.seconds)
    curve = Curve(
        title=f"PMF along x: {name}",
        xlabel="x",
        ylabel="F / kT",
        lines={k: (centres.tolist(), v.clamp(max=15).tolist()) for k, v in pmfs.items()},
    )
    return out, curve


def _toy_case(ctx: BenchContext, name: str, index: int):
    """One toy system, single-threaded, with its own generator (seed, index) so that systems can run in separate
    processes."""
    ctx = seeded_worker(ctx, index)
    return _run_one_toy(name, ctx.config, ctx)


def run_toy(ctx: BenchContext) -> BenchResult:
    """The systems run in parallel processes, one per CPU core up to cfg.workers (1: in this process)."""
    cfg: ToyBench = ctx.config
    names = list(cfg.systems)
    ctx = replace(ctx, generator=None)  # generators do not pickle; each system seeds its own
    results = parallel_map(_toy_case, [ctx] * len(names), names, range(len(names)), workers=cfg.workers)
    ours, baselines, curves = {}, {}, []
    for out, curve in results:
        ours.update(out.pop("WT-ASBS"))
        for k, v in out.items():
            baselines.setdefault(k, {}).update(v)
        curves.append(curve)
    return BenchResult(metrics=ours, baselines=baselines, curves=curves)


#: the full curriculum; Mueller-Brown needs it in the quick variant too (the short one loses or overfills a basin in
#: some seeds: side runs in RESULTS.md)
_LONG_ASBS = ASBSConfig(
    stages="ACACACACA",
    adjoint_epochs=40,
    corrector_epochs=20,
    steps_per_epoch=100,
    sde_steps=100,
    skip_epochs=20,
    lr=1e-3,
)
TOY_FULL = ToyBench(
    sampler=SamplerConfig(
        asbs=_LONG_ASBS,
        bias=BiasConfig(bins=200, sigma=0.2, height=0.005, bias_factor=6.0),
        sigma_max=2.0,
        sigma_min=0.01,
        source_std=0.01,
    ),
    n_eval=10000,
    systems=("mueller-brown", "four-well", "four-well-5d"),
    workers=3,
    asbs_by_system={},
    pmf_bins=60,
    walkers=16,
    md_steps=40000,
    md_dt=4e-3,
    md_bias=BiasConfig(bins=200, sigma=0.2, height=0.1, bias_factor=6.0),
    md_deposit_every=10,
    md_record_every=10,
)
TOY_QUICK = replace(
    TOY_FULL,
    sampler=replace(
        TOY_FULL.sampler,
        asbs=replace(
            _LONG_ASBS,
            stages="ACACA",
            adjoint_epochs=12,
            corrector_epochs=4,
            steps_per_epoch=30,
            sde_steps=50,
            skip_epochs=4,
            lr=3e-3,
        ),
    ),
    systems=("mueller-brown", "four-well"),
    workers=2,
    asbs_by_system={"mueller-brown": _LONG_ASBS},
    md_steps=8000,
)
#: toy size (the code path, not quality): both systems in this process, an AC curriculum of 2 + 1 five-step
#: epochs, 4 walkers x 200 steps
TOY_SMOKE = replace(
    TOY_QUICK,
    sampler=replace(
        TOY_QUICK.sampler,
        asbs=replace(
            TOY_QUICK.sampler.asbs,
            stages="AC",
            adjoint_epochs=2,
            corrector_epochs=1,
            steps_per_epoch=5,
            sde_steps=20,
            skip_epochs=0,
        ),
    ),
    n_eval=500,
    workers=1,
    asbs_by_system={},
    walkers=4,
    md_steps=200,
)
_TOY_DIRECTIONS = {
    f"{s}/{m}": d
    for s in TOY_INTERVALS
    for m, d in (("pmf_rmse", "min"), ("dF_err", "min"), ("basins", "max"), ("evals", "min"), ("wall_s", "min"))
}

TOY = Scenario(
    name="mol.wt_asbs.toy",
    package="mol",
    method="wt_asbs",
    run=run_toy,
    variants={"smoke": TOY_SMOKE, "quick": TOY_QUICK, "full": TOY_FULL},
    directions=_TOY_DIRECTIONS,
    tags=frozenset({"sampling", "free-energy"}),
    description="WT-ASBS vs ASBS vs well-tempered metadynamics / Langevin on toys with exact PMFs",
    # full: a guess; the samplers run on the CPU whatever the device (3 systems in 3 processes)
    expected_seconds={"smoke": 2, "quick": 195, "full": 600},
    headline=True,
    claim=Claim(
        "WT-ASBS reaches the four-well basins plain ASBS misses: Delta F within 0.5 kT of quadrature",
        "four-well/dF_err",
        "<=",
        0.5,
    ),
)
