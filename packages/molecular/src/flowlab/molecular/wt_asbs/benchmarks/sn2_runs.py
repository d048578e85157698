"""The pieces of a `mol.wt_asbs.sn2` run: one method's row of metrics, the WTMetaD reference (cached or run here)
and a (WT-)ASBS sampler trained on either coordinate system."""

from __future__ import annotations

import time

import numpy as np
import torch

from flowlab.core.bench import BenchContext
from flowlab.molecular.wt_asbs.analysis import delta_f_from_pmf, delta_f_from_samples, reweight
from flowlab.molecular.wt_asbs.asbs import ASBS
from flowlab.molecular.wt_asbs.benchmarks.common import sampler_seed
from flowlab.molecular.wt_asbs.reference import LangevinResult, langevin
from flowlab.molecular.wt_asbs.sn2 import (
    REACTANT,
    WELLS,
    internal_source,
    internal_system,
    pmf_asymmetry,
    pmf_barrier,
    reaction_cv,
    well_fractions,
)
from flowlab.molecular.wt_asbs.sn2_reference import sn2_reference

__all__ = ["md_row", "pmf_row", "reactant_md", "reference_row", "run_sampler", "sample_row", "sampler_rows"]


def sample_row(pot, x: torch.Tensor, weights: torch.Tensor | None, *, evals: int, wall: float, e_min: float):
    """Metrics of samples x: (N, 18) with optional weights (N,): wells visited, product share, Delta F error,
    median energy above the minimum (kT; from at most 256 samples, not counted in `evals`)."""
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


def pmf_row(f: torch.Tensor, nodes: torch.Tensor, *, cutoff: float) -> dict[str, float]:
    """|Delta F| (kT), barrier (kT) and asymmetry RMSE (kT, where F <= cutoff) of a PMF f / kT on xi nodes: (G,)."""
    return {
        "dF_err_bias": abs(delta_f_from_pmf(f, nodes, WELLS["reactant"], WELLS["product"])),
        "barrier_kT": pmf_barrier(f, nodes),
        "pmf_asymmetry": pmf_asymmetry(f, nodes, cutoff=cutoff),
    }


def reactant_md(cfg, pot, generator: torch.Generator, bias=None) -> LangevinResult:
    """Overdamped Langevin (WTMetaD with `bias`, plain without) on Cartesian positions: `walkers` from the reactant
    complex, md_steps steps of md_dt, a record every 10 after the first tenth (burn-in)."""
    return langevin(
        pot, REACTANT.repeat(cfg.walkers, 1), steps=cfg.md_steps, dt=cfg.md_dt, generator=generator,
        cvs=reaction_cv() if bias else None, bias=bias, deposit_every=cfg.md_deposit_every, record_every=10,
        burn_in=cfg.md_steps // 10,
    )  # fmt: skip


def md_row(cfg, ctx: BenchContext, pot, bias, *, e_min: float) -> tuple[dict[str, float], torch.Tensor]:
    """`reactant_md`'s row, its samples e^{V/kT}-reweighted with a bias, and its samples (N, 18) nm."""
    res = reactant_md(cfg, pot, ctx.generator, bias)
    w = reweight(bias(reaction_cv()(res.samples)).value, pot.kT) if bias is not None else None
    return sample_row(pot, res.samples, w, evals=res.energy_evals, wall=res.seconds, e_min=e_min), res.samples


def reference_row(cfg, ctx: BenchContext, pot, *, e_min: float) -> tuple[dict[str, float], torch.Tensor, torch.Tensor]:
    """The WTMetaD reference's row and its PMF (F / kT on xi nodes, (G,) each): the cached converged run of
    `cfg.reference` (with its drift over the last half of its snapshots), else Cartesian WTMetaD run here."""
    if cfg.reference is None:
        bias = cfg.md_bias.build(*cfg.grid_range, kT=pot.kT)
        row = md_row(cfg, ctx, pot, bias, e_min=e_min)[0]
        f, nodes = bias.free_energy() / pot.kT, bias.nodes[0]
        return {**row, **pmf_row(f, nodes, cutoff=cfg.pmf_cutoff)}, f, nodes
    ref = sn2_reference(cfg.reference)
    f, nodes = torch.as_tensor(ref.pmf), torch.as_tensor(ref.nodes)
    conv = ref.convergence()
    half = len(conv["steps"]) // 2
    row = {"evals": float(ref.energy_evals), "wall_s": ref.seconds, "hills": float(ref.hills)}
    row.update(pmf_row(f, nodes, cutoff=cfg.pmf_cutoff))
    row["dF_drift_last_half"] = float(np.ptp(conv["dF"][half:]))
    row["barrier_drift_last_half"] = float(np.ptp(conv["barrier"][half:]))
    return row, f, nodes


def run_sampler(cfg, pot, seed: int, bias, md: torch.Tensor | None = None) -> dict:
    """Train (WT-)ASBS on the complex in the variant's coordinates (Cartesian, or `internal_system`'s z with the
    source wide along the reaction line), warm-started by bridge matching on the reactant-well MD samples `md`:
    (M, 18) nm when the config has warm-start steps, and draw n_eval samples: {"model", "x": (N, 18) nm, "w": (N,)
    the e^{V/kT} weights or None, "evals" (this sampler's energy calls, not the MD's), "wall"}."""
    evals0, start = pot.n_evals, time.perf_counter()
    cv = reaction_cv()
    if cfg.coordinates == "internal":
        target, cvs = internal_system(pot, reaction_units=cfg.reaction_units)
        mean, std = internal_source(target, cfg.sampler.source_std, cfg.cv_source_std)
        kw, to_x = {"atom_dim": 1, "source_std": std}, target.cartesian
    else:
        target, cvs, mean, kw, to_x = pot, cv, REACTANT[0].float(), {"atom_dim": 3}, lambda x: x
    model = ASBS.from_config(target, cfg.sampler, source_mean=mean, cvs=cvs if bias else None, bias=bias,
                             generator=torch.Generator().manual_seed(seed), **kw)  # fmt: skip
    if cfg.sampler.asbs.warm_start_steps:
        if md is None:
            raise ValueError("md: the config warm-starts the sampler, give the MD samples")
        model.warm_start(target.z(md) if cfg.coordinates == "internal" else md)
    model.train()
    x = to_x(model.sample(cfg.n_eval)[1].double())
    w = reweight(bias(cv(x)).value, pot.kT) if bias is not None else None
    return {"model": model, "x": x, "w": w, "evals": pot.n_evals - evals0, "wall": time.perf_counter() - start}


def sampler_rows(
    cfg, ctx: BenchContext, pot, *, e_min: float, counted, md: torch.Tensor, md_evals: int, md_wall: float
) -> dict[str, tuple[dict, dict]]:
    """WT-ASBS, then plain ASBS, each run through `counted` (which resets and reads the energy counters) and, with
    warm-start steps, bridge-matched onto the plain MD's samples `md`: (M, 18) first (their `md_evals` energy calls
    and `md_wall` seconds added to each sampler's evals and wall_s and reported as warm_start_evals and
    warm_start_wall_s); each row has the epochs trained and stopped_diverging (1 when `ASBSConfig.stop_above_kT`
    ended it early): {name: (row, `run_sampler`'s run)}."""
    extra, extra_wall = (md_evals, md_wall) if cfg.sampler.asbs.warm_start_steps else (0, 0.0)
    out = {}
    for name, wt in (("WT-ASBS", True), ("ASBS", False)):

        def one(wt=wt):
            bias = cfg.sampler.bias.build(*cfg.grid_range, kT=pot.kT) if wt else None
            run = run_sampler(cfg, pot, sampler_seed(ctx.generator), bias, md)
            total_wall = run["wall"] + extra_wall
            row = sample_row(pot, run["x"], run["w"], evals=run["evals"] + extra, wall=total_wall, e_min=e_min)
            log = run["model"].log
            row.update(warm_start_evals=float(extra), warm_start_wall_s=extra_wall, epochs=float(len(log.stage)))
            row["stopped_diverging"] = float(log.stopped_epoch is not None)
            return row, run

        out[name] = counted(one)
    return out
