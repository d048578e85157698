"""`bio.wright_fisher.exactness`: the exact forward sampler against independent routes to the same law.

- Lineages: the series, Griffiths' normal approximation, a Gillespie pure-death simulation (started from Griffiths
  at tau = 0.01, run leg by leg) and the sampler's own draws at each tau (below tau = 0.1 its small-time branch:
  Griffiths at 0.01, then the death process for each draw): total-variation distances of the histograms. With the
  small-time branch off, the series in plain float64 at small tau: its mass error and negative cells.
- The mean identity E[x_tau | x_0 = b] = pi + e^(-psi tau / 2)(e_b - pi) from the series (max error).
- The sampler against the Wright-Fisher SDE itself, dx = (psi / 2)(pi - x) dtau + G(x) dW, simulated from the
  vertex by Euler-Maruyama on a fine grid: energy distance with a permutation p-value, beside the energy distance of
  two independent exact samples (the noise floor).
- The family (`family.py`): a finite Wright-Fisher population of zeta individuals against the sampler; the
  zeta-discrete ELBO at zeta = 1 against the uniform path's; the zeta ladder against the Gaussian ELBO.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch

from flowlab.biology_dynamics.wright_fisher.ancestral import (
    lineage_probs,
    sample_lineages,
    simulate_lineages,
)
from flowlab.biology_dynamics.wright_fisher.benchmarks.family import (
    ladder_metrics,
    population_metrics,
    zeta_one_identity,
)
from flowlab.biology_dynamics.wright_fisher.process import WrightFisherPath
from flowlab.biology_dynamics.wright_fisher.sample import simplex_noise
from flowlab.biology_dynamics.wright_fisher.table import griffiths_pmf
from flowlab.core.bench import BenchContext, BenchResult, Scenario
from flowlab.core.config import Config
from flowlab.core.metrics import energy_distance
from flowlab.core.solvers import solve_sde

__all__ = ["SCENARIO"]

F64 = torch.float64


@dataclass(frozen=True)
class ExactnessBench(Config):
    """`letters` (psi = letters); `draws` lineage counts per route at each of `taus`; `sde_samples` points per side at
    `sde_tau` with `sde_steps` Euler-Maruyama steps and `permutations` for the p-value; the plain float64 series at
    `float64_taus`; `population_samples` populations of each size in `population_zetas`; the ELBO ladder over
    `zetas` on `elbo_positions` letters with `elbo_draws` time draws each."""

    letters: int = 4
    draws: int = 200_000
    taus: tuple[float, ...] = (0.05, 0.1, 0.5, 2.0)
    sde_samples: int = 1500
    sde_steps: int = 4000
    sde_tau: float = 0.3
    permutations: int = 200
    float64_taus: tuple[float, ...] = (0.02, 0.05)
    population_zetas: tuple[int, ...] = (200, 1000)
    population_samples: int = 10_000
    zetas: tuple[int, ...] = (1, 10, 100, 1000, 10_000)
    elbo_positions: int = 20_000
    elbo_draws: int = 4


FULL = replace(
    ExactnessBench(),
    draws=1_000_000,
    sde_samples=3000,
    sde_steps=20_000,
    permutations=500,
    population_samples=50_000,
    zetas=(1, 10, 100, 1000, 10_000, 100_000),
    elbo_draws=16,
)
QUICK = ExactnessBench()
SMOKE = replace(
    QUICK,
    draws=5000,
    taus=(0.1, 0.5),
    sde_samples=150,
    sde_steps=200,
    permutations=20,
    population_zetas=(20, 50),
    population_samples=400,
    zetas=(1, 10),
    elbo_positions=500,
    elbo_draws=2,
)


def _tv(p: torch.Tensor, q: torch.Tensor) -> float:
    n = max(p.numel(), q.numel())
    pad = torch.nn.functional.pad
    return 0.5 * float((pad(p, (0, n - p.numel())) - pad(q, (0, n - q.numel()))).abs().sum())


def _lineage_metrics(cfg: ExactnessBench, g: torch.Generator) -> dict[str, float]:
    psi = float(cfg.letters)
    series = lineage_probs(torch.tensor(cfg.taus, dtype=F64), psi, k_max=250)
    griffiths = griffiths_pmf(torch.tensor(cfg.taus, dtype=F64), psi, series.shape[-1] - 1)
    k = sample_lineages(torch.full((cfg.draws,), 0.01, dtype=F64), psi, generator=g)
    now, out = 0.01, {}
    for tau, row, approx in zip(cfg.taus, series, griffiths, strict=True):
        k = simulate_lineages(k, tau - now, psi, generator=g)
        now = tau
        out[f"tv_gillespie_series_tau{tau:g}"] = _tv(torch.bincount(k).double() / k.numel(), row)
        out[f"tv_griffiths_series_tau{tau:g}"] = _tv(approx, row)
        drawn = sample_lineages(torch.full((cfg.draws,), tau, dtype=F64), psi, generator=g)
        out[f"tv_sampler_series_tau{tau:g}"] = _tv(torch.bincount(drawn).double() / drawn.numel(), row)
    return out


def _float64_series_metrics(cfg: ExactnessBench) -> dict[str, float]:
    """What switching the small-time branch off does: the series summed in plain float64 (no mpmath) at taus below
    SMALL_TAU, its mass error |sum q - 1| and its count of negative probabilities (< -1e-12)."""
    q = lineage_probs(torch.tensor(cfg.float64_taus, dtype=F64), float(cfg.letters), k_max=250, high_precision=False)
    out = {}
    for tau, row in zip(cfg.float64_taus, q, strict=True):
        out[f"float64_series_mass_error_tau{tau:g}"] = abs(float(row.sum()) - 1)
        out[f"float64_series_negative_cells_tau{tau:g}"] = float((row < -1e-12).sum())
    return out


def _mean_error(cfg: ExactnessBench) -> float:
    path = WrightFisherPath(cfg.letters)
    taus = torch.tensor([t * (1 + 1e-9) for t in cfg.taus if t >= 0.1], dtype=F64)  # clear of float round trips
    t = 1 - (-torch.expm1(-path.psi * taus / 2)) / path.t_max
    exact = 1 / cfg.letters + path.signal(t)[:, None] * (torch.eye(cfg.letters, dtype=F64)[0] - 1 / cfg.letters)
    return float((path.mean(0, t) - exact).abs().max())


def _sde_metrics(cfg: ExactnessBench, g: torch.Generator) -> dict[str, float]:
    path = WrightFisherPath(cfg.letters)
    n, tau = cfg.sde_samples, cfg.sde_tau
    t = torch.full((n,), 1 - (-math.expm1(-path.psi * tau / 2)) / path.t_max, dtype=F64)
    x_0 = torch.zeros(n, 1, dtype=torch.long)
    exact, again = path.sample(x_0, t, generator=g)[:, 0], path.sample(x_0, t, generator=g)[:, 0]
    start = torch.eye(cfg.letters, dtype=F64)[0].expand(n, -1).clone()
    drift = lambda x, t: path.psi / 2 * (1 / cfg.letters - x)  # noqa: E731
    grid = torch.linspace(0, 1, cfg.sde_steps + 1, dtype=F64)  # the solver's clock u = tau' / tau
    simulated = solve_sde(
        lambda x, t: tau * drift(x, t),
        math.sqrt(tau),
        start,
        grid,
        generator=g,
        noise_map=simplex_noise,
        projection=path.simplex.projx,
    )
    observed = float(energy_distance(exact, simulated))
    pooled = torch.cat([exact, simulated])
    null = []
    for _ in range(cfg.permutations):
        perm = torch.randperm(2 * n, generator=g)
        null.append(float(energy_distance(pooled[perm[:n]], pooled[perm[n:]])))
    p_value = (1 + sum(v >= observed for v in null)) / (1 + cfg.permutations)
    return {"energy_sde": observed, "energy_floor": float(energy_distance(exact, again)), "p_sde": p_value}


def _run(ctx: BenchContext) -> BenchResult:
    cfg: ExactnessBench = ctx.config
    metrics = {**_lineage_metrics(cfg, ctx.generator), "mean_identity_error": _mean_error(cfg)}
    metrics.update(_float64_series_metrics(cfg))
    metrics.update(_sde_metrics(cfg, ctx.generator))
    g = ctx.generator
    metrics.update(population_metrics(cfg.letters, cfg.population_zetas, cfg.taus, cfg.population_samples, g))
    metrics["zeta1_identity_error"] = zeta_one_identity(cfg.letters, 256, g)
    metrics.update(ladder_metrics(cfg.letters, cfg.zetas, cfg.elbo_positions, cfg.elbo_draws, ctx.seed, g))
    return BenchResult(metrics=metrics)


SCENARIO = Scenario(
    name="bio.wright_fisher.exactness",
    package="biology-dynamics",
    method="wright_fisher",
    run=_run,
    variants={"smoke": SMOKE, "quick": QUICK, "full": FULL},
    expected_seconds={"smoke": 4, "quick": 60, "full": 360},
    directions={"p_sde": "max", "mean_identity_error": "min", "zeta1_identity_error": "min"},
    tags=frozenset({"simplex", "exactness"}),
    description="Lineage law by series, Griffiths and Gillespie; the exact sampler against a fine Wright-Fisher SDE "
    "and a finite population; the zeta-discrete ELBO from zeta = 1 (uniform) to the Gaussian limit.",
)
