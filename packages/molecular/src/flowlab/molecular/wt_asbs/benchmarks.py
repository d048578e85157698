"""Benchmarks `mol.wt_asbs.toy` (Mueller-Brown, four-well; exact PMFs by quadrature), `mol.wt_asbs.aldp`
(alanine dipeptide: WT-ASBS vs OpenMM well-tempered metadynamics and plain MD on the same ff96/OBC1 energy) and
`mol.wt_asbs.sn2` (Cl- + CH3Cl on GFN2-xTB: WT-ASBS and ASBS vs well-tempered metadynamics and plain Langevin;
exact Delta F = 0 and an even PMF by symmetry).

Toy metrics per system `<sys>/...`: pmf_rmse (k_BT, populated range: exact F <= 6 k_BT), dF_err (|Delta F_AB| error
in k_BT between the CV intervals A and B), basins (basins found in 2-D), evals (energy evaluations, the samples'
weights included), wall_s. The samplers' PMF and Delta F come from their samples with path-space importance weights
(`ASBS.sample_weighted`, consistent whatever the sampler learnt; `ess_frac` their effective sample size over N).
WT-ASBS also reports the spec's estimators: `*_bias` from F = -gamma/(gamma-1) V and `*_rw` from the exp(V/kT)
reweighted histogram (exact only for a converged sampler); ASBS its unweighted `dF_err_raw`.

Alanine dipeptide: Delta F (kJ/mol) of C7ax/aR/aL relative to C7eq, basins visited, energy calls, the FES RMSE of the
bias estimate and KL(phi), KL(psi), W2(phi, psi) against the same run's WTMetaD FES (ASBS Table 3's metrics, the
published numbers beside them); both FES plotted to `wt_asbs_aldp_fes.png`.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np
import torch

from flowlab.core.bench import BenchContext, BenchResult, Curve, Scenario, parallel_map, require_file, seeded_worker
from flowlab.molecular.wt_asbs.analysis import (
    basin_coverage,
    delta_f_from_pmf,
    delta_f_from_samples,
    fes_rmse,
    pmf_from_samples,
    pmf_quadrature,
    reweight,
    torsion_marginal_kl,
    torsion_w2,
)
from flowlab.molecular.wt_asbs.asbs import ASBS, ASBSConfig, EDMNoise
from flowlab.molecular.wt_asbs.bias import WellTemperedBias
from flowlab.molecular.wt_asbs.cvs import CVSet, LinearCV, TorsionCV
from flowlab.molecular.wt_asbs.potentials import EmbeddedToy, FourWell, MuellerBrown, OpenMMPotential
from flowlab.molecular.wt_asbs.reference import PHI, PSI, langevin, openmm_md, openmm_wtmetad
from flowlab.molecular.wt_asbs.sn2 import REACTANT, WELLS, reaction_cv, sn2_potential, well_fractions

__all__ = [
    "ALDP",
    "ALDP_BASINS",
    "SCENARIOS",
    "SN2",
    "TOY",
    "make_toy",
    "run_aldp",
    "run_sn2",
    "run_toy",
    "toy_asbs_config",
]

#: the spec's per-atom clip of grad(E)/kT, 100 per Angstrom, in the molecular systems' unit (per nm)
_CLIP_100_PER_ANGSTROM = 1000.0
#: CV intervals (A, B) for Delta F_AB = F_B - F_A on each toy (CV = x).
_TOY_INTERVALS = {
    "mueller-brown": ((-1.5, -0.3), (0.3, 1.2)),
    "four-well": ((-2.2, 0.0), (0.0, 2.2)),
    "four-well-5d": ((-2.2, 0.0), (0.0, 2.2)),
}
#: (phi, psi) boxes in radians (spec §6.2).
ALDP_BASINS = {
    "C7eq": ((-2.5, -0.5), (0.3, 2.0)),
    "C7ax": ((0.5, 2.0), (-2.0, -0.3)),
    "aR": ((-2.5, -0.5), (-2.0, -0.3)),
    "aL": ((0.3, 1.5), (0.0, 1.5)),
}


def make_toy(name: str):
    """'mueller-brown' | 'four-well' | 'four-well-5d' (four-well + 3 harmonic dimensions)."""
    if name == "mueller-brown":
        return MuellerBrown()
    if name == "four-well":
        return FourWell()
    if name == "four-well-5d":
        return EmbeddedToy(FourWell(), 3)
    raise ValueError(f"system: expected mueller-brown|four-well|four-well-5d, got {name!r}")


def _cv_bias(lo: float, hi: float, cfg, *, kT: float, metad: bool = False) -> WellTemperedBias:
    """A 1-D well-tempered bias on [lo, hi] with cfg["bias_bins"] nodes and the sampler's (hill_*) or the
    metadynamics reference's (md_hill_*) hill sigma and height."""
    return WellTemperedBias(
        lo,
        hi,
        cfg["bias_bins"],
        sigma=cfg["md_hill_sigma" if metad else "hill_sigma"],
        height=cfg["md_hill_height" if metad else "hill_height"],
        bias_factor=cfg["bias_factor"],
        kT=kT,
    )


def _toy_bias(pot, cfg, *, metad: bool = False) -> WellTemperedBias:
    """The bias on a toy's CV x over its box (energies in kT)."""
    (lo, hi), _ = pot.box
    return _cv_bias(lo, hi, cfg, kT=1.0, metad=metad)


def toy_asbs_config(cfg, name: str) -> ASBSConfig:
    """The sampler settings of toy `name` in a toy variant's config: cfg["asbs"] updated by
    cfg["asbs_by_system"][name]."""
    return ASBSConfig(**{**cfg["asbs"], **cfg.get("asbs_by_system", {}).get(name, {})})


def _run_one_toy(name: str, cfg, ctx: BenchContext):
    pot = make_toy(name)
    (lo, hi), _ = pot.box
    edges = torch.linspace(lo, hi, cfg["pmf_bins"] + 1, dtype=torch.float64)
    centres = 0.5 * (edges[1:] + edges[:-1])
    exact = pmf_quadrature(make_toy(name.replace("-5d", "")).energy, pot.box, centres)
    a, b = _TOY_INTERVALS[name]
    df_exact = delta_f_from_pmf(exact, centres, a, b)
    cvs = CVSet([LinearCV([1.0] + [0.0] * (pot.dim - 1))])
    mean = torch.tensor(np.mean(pot.minima, axis=0).tolist() + [0.0] * (pot.dim - 2), dtype=torch.float32)
    acfg = toy_asbs_config(cfg, name)
    noise = EDMNoise(cfg["sigma_max"], cfg["sigma_min"], 3.0)
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
        bias = _toy_bias(pot, cfg) if method == "WT-ASBS" else None
        seed = int(torch.randint(0, 2**31 - 1, (1,), generator=ctx.generator))
        model = ASBS(
            pot,
            noise,
            acfg,
            source_std=cfg["source_std"],
            source_mean=mean,
            cvs=cvs if bias else None,
            bias=bias,
            generator=torch.Generator().manual_seed(seed),
        )
        start = time.perf_counter()
        model.train()
        _, x1, log_w = model.sample_weighted(cfg["n_eval"])
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

    walkers = torch.tensor(pot.minima[0], dtype=torch.float64).repeat(cfg["walkers"], 1)
    walkers = torch.cat([walkers, torch.zeros(cfg["walkers"], pot.dim - 2, dtype=torch.float64)], 1)
    for method in ("WTMetaD (Langevin)", "Langevin MD"):
        pot.n_evals = 0
        bias = _toy_bias(pot, cfg, metad=True) if method.startswith("WTMetaD") else None
        res = langevin(
            pot,
            walkers,
            steps=cfg["md_steps"],
            dt=cfg["md_dt"],
            generator=ctx.generator,
            cvs=cvs if bias else None,
            bias=bias,
            deposit_every=cfg["md_deposit_every"],
            record_every=cfg["md_record_every"],
            burn_in=cfg["md_steps"] // 10,
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
    """The systems run in parallel processes, one per CPU core up to cfg["workers"] (1: in this process)."""
    cfg = ctx.config
    names = list(cfg["systems"])
    ctx = replace(ctx, generator=None)  # generators do not pickle; each system seeds its own
    results = parallel_map(_toy_case, [ctx] * len(names), names, range(len(names)), workers=int(cfg.get("workers", 1)))
    ours, baselines, curves = {}, {}, []
    for out, curve in results:
        ours.update(out.pop("WT-ASBS"))
        for k, v in out.items():
            baselines.setdefault(k, {}).update(v)
        curves.append(curve)
    return BenchResult(metrics=ours, baselines=baselines, curves=curves)


_TOY_COMMON = {
    "bias_bins": 200,
    "pmf_bins": 60,
    "hill_sigma": 0.2,
    "hill_height": 0.005,
    "bias_factor": 6.0,
    "sigma_max": 2.0,
    "sigma_min": 0.01,
    "source_std": 0.01,
    "n_eval": 10000,
    "walkers": 16,
    "md_dt": 4e-3,
    "md_hill_height": 0.1,
    "md_hill_sigma": 0.2,
    "md_deposit_every": 10,
    "md_record_every": 10,
}
#: the full curriculum; Mueller-Brown needs it in the quick variant too (the short one loses or overfills a basin in
#: some seeds: side runs in the README)
_TOY_LONG_ASBS = {
    "stages": "ACACACACA",
    "adjoint_epochs": 40,
    "corrector_epochs": 20,
    "steps_per_epoch": 100,
    "sde_steps": 100,
    "skip_epochs": 20,
    "lr": 1e-3,
}
_TOY_DIRECTIONS = {
    f"{s}/{m}": d
    for s in _TOY_INTERVALS
    for m, d in (("pmf_rmse", "min"), ("dF_err", "min"), ("basins", "max"), ("evals", "min"), ("wall_s", "min"))
}

TOY = Scenario(
    name="mol.wt_asbs.toy",
    package="mol",
    method="wt_asbs",
    run=run_toy,
    variants={
        "quick": {
            **_TOY_COMMON,
            "systems": ("mueller-brown", "four-well"),
            "workers": 2,
            "asbs": {
                "stages": "ACACA",
                "adjoint_epochs": 12,
                "corrector_epochs": 4,
                "steps_per_epoch": 30,
                "sde_steps": 50,
                "skip_epochs": 4,
                "lr": 3e-3,
            },
            "asbs_by_system": {"mueller-brown": _TOY_LONG_ASBS},
            "md_steps": 8000,
        },
        "full": {
            **_TOY_COMMON,
            "systems": ("mueller-brown", "four-well", "four-well-5d"),
            "workers": 3,
            "asbs": _TOY_LONG_ASBS,
            "md_steps": 40000,
        },
    },
    directions=_TOY_DIRECTIONS,
    tags=frozenset({"sampling", "free-energy"}),
    description="WT-ASBS vs ASBS vs well-tempered metadynamics / Langevin on toys with exact PMFs",
)


# --- alanine dipeptide ------------------------------------------------------------------------------------


def _basin_df(phi_psi: np.ndarray, weights: np.ndarray | None, kT: float) -> dict[str, float]:
    """Delta F (kJ/mol) of each basin relative to C7eq from (weighted) samples; pseudo-count 0.5 for empty ones."""
    s = torch.as_tensor(phi_psi, dtype=torch.float64)
    w = None if weights is None else torch.as_tensor(weights, dtype=torch.float64)
    ref = ALDP_BASINS["C7eq"]
    return {
        f"dF_{k}": kT * delta_f_from_samples(s, ref, box, weights=w) for k, box in ALDP_BASINS.items() if k != "C7eq"
    }


def _fes_df(fes: np.ndarray, kT: float) -> dict[str, float]:
    """Delta F (kJ/mol) between basins from an FES on a (G, G) grid over [-pi, pi]^2 (OpenMM order: psi, phi)."""
    g = fes.shape[0]
    nodes = np.linspace(-math.pi, math.pi, g)
    f = torch.as_tensor(fes, dtype=torch.float64)  # OpenMM: fes[i_psi, i_phi]
    phi, psi = np.meshgrid(nodes, nodes)

    def logmass(box):
        (p0, p1), (q0, q1) = box
        mask = torch.as_tensor((phi >= p0) & (phi <= p1) & (psi >= q0) & (psi <= q1))
        return torch.logsumexp(-f[mask] / kT, 0)

    ref = logmass(ALDP_BASINS["C7eq"])
    return {f"dF_{k}": float(kT * (ref - logmass(box))) for k, box in ALDP_BASINS.items() if k != "C7eq"}


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


def _plot_fes(path, panels: dict[str, np.ndarray], kT: float) -> None:
    """FES panels (G, G) in kJ/mol, each (psi, phi)-indexed over [-pi, pi]^2, in k_BT above their minimum."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6))
    top = min(15.0, max(float((f.max() - f.min()) / kT) for f in panels.values()))  # one colour scale for all
    for ax, (title, f) in zip(np.atleast_1d(axes), panels.items(), strict=True):
        im = ax.imshow(
            (f - f.min()) / kT, origin="lower", extent=(-math.pi, math.pi, -math.pi, math.pi), vmin=0, vmax=top
        )
        ax.set(title=title, xlabel="phi (rad)", ylabel="psi (rad)")
        fig.colorbar(im, ax=ax, label="F / kT")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _coverage(phi_psi: np.ndarray) -> float:
    return float(
        sum(
            (
                ((phi_psi[:, 0] >= p0) & (phi_psi[:, 0] <= p1) & (phi_psi[:, 1] >= q0) & (phi_psi[:, 1] <= q1)).sum()
                >= 3
                for (p0, p1), (q0, q1) in ALDP_BASINS.values()
            )
        )
    )


def run_aldp(ctx: BenchContext) -> BenchResult:
    cfg = ctx.config
    prmtop = require_file(ctx.data_root, "alanine_dipeptide", "openmm_tests", "alanine-dipeptide-implicit.prmtop")
    inpcrd = require_file(ctx.data_root, "alanine_dipeptide", "openmm_tests", "alanine-dipeptide-implicit.inpcrd")
    solvent = cfg["solvent"]
    pot = OpenMMPotential(prmtop, solvent=solvent, workers=cfg["workers"], platform="Reference")
    kT = pot.kT
    x_ref = pot.positions(inpcrd).float()
    cvs = CVSet([TorsionCV(PHI), TorsionCV(PSI)])
    bias = WellTemperedBias(
        (-math.pi, -math.pi),
        (math.pi, math.pi),
        cfg["grid"],
        sigma=cfg["hill_sigma"],
        height=cfg["hill_height"],
        bias_factor=cfg["bias_factor"],
        kT=kT,
        periodic=True,
    )
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=ctx.generator))
    model = ASBS(
        pot,
        EDMNoise(cfg["sigma_max"], cfg["sigma_min"], 3.0),
        ASBSConfig(**cfg["asbs"]),
        source_std=cfg["source_std"],
        source_mean=x_ref[0],
        cvs=cvs,
        bias=bias,
        atom_dim=3,
        generator=torch.Generator().manual_seed(seed),
    )
    start = time.perf_counter()
    log = model.train()
    _, x1 = model.sample(cfg["n_eval"])
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
        heights[:, None] * torch.exp(-0.5 * (d0 / cfg["hill_sigma"]) ** 2),
        torch.exp(-0.5 * (d1 / cfg["hill_sigma"]) ** 2),
    )
    hill_err = float((bias.values - before - expect).abs().max())
    bias.load_state_dict({"values": before, "grads": bias.grads, "n_hills": torch.tensor(bias.n_hills)})
    phi_psi = s.numpy()
    ours = {
        "evals": float(pot.n_evals),
        "wall_s": wall,
        "basins": _coverage(phi_psi),
        "bias_max_kjmol": float(bias.values.max()),
        "hills": float(bias.n_hills),
        "hill_check_err": hill_err,
        "ess_frac": float(1 / (w**2).sum()) / len(w),
        "bias_grew": float(all(b2 >= b1 for b1, b2 in zip(log.max_bias, log.max_bias[1:], strict=False))),
    }
    ours.update(_basin_df(phi_psi, w.numpy(), kT))

    meta = openmm_wtmetad(
        prmtop,
        inpcrd,
        steps=cfg["md_steps"],
        solvent=solvent,
        seed=ctx.seed,
        bias_factor=cfg["bias_factor"],
        grid=cfg["grid"],
        height=cfg["metad_height"],
        frequency=cfg["metad_frequency"],
    )
    metad = {"evals": float(meta.energy_evals), "wall_s": meta.seconds, "basins": _coverage(meta.cvs)}
    metad.update(_fes_df(meta.fes, kT))
    md = openmm_md(prmtop, inpcrd, steps=cfg["md_steps"], solvent=solvent, seed=ctx.seed)
    plain = {"evals": float(md.energy_evals), "wall_s": md.seconds, "basins": _coverage(md.cvs)}
    plain.update(_basin_df(md.cvs, None, kT))
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
    _plot_fes(fes_png, {"WT-ASBS (bias)": f_ours, "WTMetaD (OpenMM)": f_meta}, kT)
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


ALDP = Scenario(
    name="mol.wt_asbs.aldp",
    package="mol",
    method="wt_asbs",
    run=run_aldp,
    variants={
        "quick": {
            "solvent": "OBC1",
            "workers": 1,
            "grid": 150,
            "hill_sigma": 0.2,
            "hill_height": 0.0482,
            "bias_factor": 8.0,
            "sigma_max": 0.05,
            "sigma_min": 1e-4,
            "source_std": 0.01,
            "n_eval": 256,
            "asbs": {
                "stages": "ACA",
                "adjoint_epochs": 12,
                "corrector_epochs": 6,
                "steps_per_epoch": 10,
                "batch_size": 64,
                "new_samples": 64,
                "buffer_size": 512,
                "sde_steps": 50,
                "skip_epochs": 5,
                "lr": 1e-3,
                "force_clip": _CLIP_100_PER_ANGSTROM,
            },
            "md_steps": 25000,
            "metad_height": 1.0,
            "metad_frequency": 500,
        },
        "full": {
            "solvent": "OBC1",
            "workers": 8,
            "grid": 150,
            "hill_sigma": 0.2,
            "hill_height": 0.0482,
            "bias_factor": 8.0,
            "sigma_max": 0.6,
            "sigma_min": 1e-4,
            "source_std": 0.05,
            "n_eval": 4096,
            "asbs": {
                "stages": "ACACACACA",
                "adjoint_epochs": 1000,
                "corrector_epochs": 500,
                "steps_per_epoch": 100,
                "batch_size": 64,
                "new_samples": 256,
                "buffer_size": 2048,
                "sde_steps": 250,
                "skip_epochs": 50,
                "lr": 1e-4,
                "force_clip": _CLIP_100_PER_ANGSTROM,
            },
            "md_steps": 2_500_000,
            "metad_height": 1.0,
            "metad_frequency": 500,
        },
    },
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
)


# --- SN2 on GFN2-xTB -----------------------------------------------------------------------------------------


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
    cfg = ctx.config
    pot = sn2_potential(workers=cfg["workers"])
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
            pot, REACTANT.repeat(cfg["walkers"], 1), steps=cfg["md_steps"], dt=cfg["md_dt"], generator=ctx.generator,
            cvs=cv if bias else None, bias=bias, deposit_every=cfg["md_deposit_every"], record_every=10,
            burn_in=cfg["md_steps"] // 10,
        )  # fmt: skip
        w = reweight(bias(cv(res.samples)).value, kT) if bias is not None else None
        return _sn2_row(pot, res.samples, w, evals=res.energy_evals, wall=res.seconds, e_min=e_min)

    metad = _cv_bias(*cfg["grid_range"], cfg, kT=kT, metad=True)
    out["WTMetaD (Langevin)"] = counted(lambda: md(metad))
    reference, extra = _bias_pmf_metrics(metad, kT)
    nodes = metad.nodes[0]
    well = reference[(nodes >= WELLS["reactant"][0]) & (nodes <= WELLS["reactant"][1])].min()
    extra.update(
        pmf_asymmetry=_pmf_asymmetry(reference, nodes, cutoff=cfg["pmf_cutoff"]),
        barrier_kT=float(np.interp(0.0, nodes.numpy(), reference.numpy()) - well),
    )
    out["WTMetaD (Langevin)"].update(extra)
    out["Langevin MD"] = counted(lambda: md(None))
    pmfs = {"WTMetaD (Langevin)": (nodes.tolist(), reference.clamp(max=25).tolist())}

    def asbs(bias):
        seed = int(torch.randint(0, 2**31 - 1, (1,), generator=ctx.generator))
        model = ASBS(
            pot, EDMNoise(cfg["sigma_max"], cfg["sigma_min"], 3.0), ASBSConfig(**cfg["asbs"]),
            source_std=cfg["source_std"], source_mean=REACTANT[0].float(), cvs=cv if bias else None, bias=bias,
            atom_dim=3, generator=torch.Generator().manual_seed(seed),
        )  # fmt: skip
        start = time.perf_counter()
        model.train()
        _, x1 = model.sample(cfg["n_eval"])
        wall, evals, x1 = time.perf_counter() - start, pot.n_evals, x1.double()
        w = reweight(bias(cv(x1)).value, kT) if bias is not None else None
        return _sn2_row(pot, x1, w, evals=evals, wall=wall, e_min=e_min)

    wt = _cv_bias(*cfg["grid_range"], cfg, kT=kT)
    ours = counted(lambda: asbs(wt))
    f, extra = _bias_pmf_metrics(wt, kT)
    ours.update(extra, pmf_rmse_vs_metad=fes_rmse(f, reference, cutoff=cfg["pmf_cutoff"]), hills=float(wt.n_hills))
    pmfs["WT-ASBS"] = (nodes.tolist(), f.clamp(max=25).tolist())
    out["ASBS"] = counted(lambda: asbs(None))
    curve = Curve(title="SN2 PMF along d(C-Cl_a) - d(C-Cl_b)", xlabel="xi (nm)", ylabel="F / kT", lines=pmfs)
    return BenchResult(metrics=ours, baselines=out, curves=[curve])


_SN2_ASBS = {
    "stages": "ACACA", "adjoint_epochs": 30, "corrector_epochs": 6, "steps_per_epoch": 30, "batch_size": 64,
    "new_samples": 64, "buffer_size": 512, "sde_steps": 50, "skip_epochs": 5, "lr": 1e-3,
    "force_clip": _CLIP_100_PER_ANGSTROM,
}  # fmt: skip
_SN2_COMMON = {
    "workers": 2, "bias_bins": 150, "grid_range": (-0.3, 0.3), "hill_sigma": 0.01, "hill_height": 0.5,
    "md_hill_sigma": 0.01, "md_hill_height": 3.0,
    "bias_factor": 10.0, "sigma_max": 0.03, "sigma_min": 1e-4, "source_std": 0.003, "n_eval": 512,
    "md_dt": 2e-6, "md_deposit_every": 10, "pmf_cutoff": 20.0,
}  # fmt: skip

SN2 = Scenario(
    name="mol.wt_asbs.sn2",
    package="mol",
    method="wt_asbs",
    run=run_sn2,
    variants={
        "quick": {**_SN2_COMMON, "walkers": 8, "md_steps": 3000, "asbs": _SN2_ASBS},
        "full": {
            **_SN2_COMMON,
            "walkers": 16,
            "md_steps": 30000,
            "n_eval": 4096,
            "asbs": {**_SN2_ASBS, "stages": "ACACACACA", "adjoint_epochs": 200, "steps_per_epoch": 100},
        },
    },
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
)

SCENARIOS = (TOY, ALDP, SN2)
