"""`core.solvers`: endpoint error against NFE of every fixed-step solver on the analytic 8-Gaussian ring, beside the
same steppers in torchdiffeq; slopes against the expected orders 1/2/2/4 and dopri5's cost for the same accuracy."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import torchdiffeq

from flowlab.core import grids
from flowlab.core.bench import BenchContext, BenchResult, Claim, Curve, Scenario, Timer
from flowlab.core.config import Config
from flowlab.core.distributions import randn
from flowlab.core.metrics import sliced_wasserstein
from flowlab.core.schedules import CondOT
from flowlab.core.solvers import solve_ode, solve_ode_adaptive
from flowlab.core.testing.analytic import GaussianMixture
from flowlab.core.testing.asserts import empirical_order

STAGES = {"euler": 1, "midpoint": 2, "heun": 2, "rk4": 4}
EXPECTED_ORDER = {"euler": 1.0, "midpoint": 2.0, "heun": 2.0, "rk4": 4.0}
TORCHDIFFEQ_NAME = {"euler": "euler", "midpoint": "midpoint", "rk4": "rk4"}


@dataclass(frozen=True)
class SolversBench(Config):
    """Draws from the ring, the fixed-step grid sizes and dopri5's tolerance."""

    n_samples: int = 16384
    steps: tuple[int, ...] = (8, 16, 32, 64, 128, 256)
    dopri_tol: float = 1e-8


FULL = SolversBench()
QUICK = replace(FULL, n_samples=512, steps=(8, 16, 32, 64), dopri_tol=1e-6)
SMOKE = replace(QUICK, n_samples=128, steps=(8, 16))


def run(ctx: BenchContext) -> BenchResult:
    """Endpoint error against NFE of every fixed-step solver and of torchdiffeq's on the exact 8-Gaussian ring field,
    their empirical orders, dopri5's error and NFE, and the sliced W2 of rk4's samples to the data."""
    cfg: SolversBench = ctx.config
    dtype = torch.float64
    mixture = GaussianMixture.ring(8, radius=3.0, std=0.6, schedule=CondOT(), dtype=dtype).to(ctx.device, dtype)
    field = mixture.velocity
    x0 = randn((cfg.n_samples, 2), generator=ctx.generator, dtype=dtype).to(ctx.device)
    span = torch.tensor([0.0, 1.0], dtype=dtype, device=ctx.device)
    reference = solve_ode_adaptive(field, x0, span, atol=1e-10, rtol=1e-10).x

    def error(x: torch.Tensor) -> float:
        return float((x - reference).norm(dim=-1).mean())

    steps = cfg.steps
    metrics: dict[str, float] = {}
    baseline: dict[str, float] = {}
    lines, base_lines = {}, {}
    with torch.inference_mode():
        for method, stages in STAGES.items():
            errs = [
                error(solve_ode(field, x0, grids.uniform(n, dtype=dtype, device=ctx.device), method=method))
                for n in steps
            ]
            nfe = [n * stages for n in steps]
            metrics[f"order_{method}"] = empirical_order(errs, nfe=nfe)
            metrics[f"err_{method}@{nfe[-1]}nfe"] = errs[-1]
            lines[method] = (nfe, errs)
            if method in TORCHDIFFEQ_NAME:
                berrs = []
                for n in steps:
                    grid = grids.uniform(n, dtype=dtype, device=ctx.device)
                    sol = torchdiffeq.odeint(
                        lambda t, x: field(x=x, t=t.expand(x.shape[0])), x0, grid, method=TORCHDIFFEQ_NAME[method]
                    )
                    berrs.append(error(sol[-1]))
                baseline[f"order_{method}"] = empirical_order(berrs, nfe=nfe)
                baseline[f"err_{method}@{nfe[-1]}nfe"] = berrs[-1]
                base_lines[f"torchdiffeq {method}"] = (nfe, berrs)
        # dopri5 at the tolerance that matches rk4's finest error: its NFE for the same accuracy
        dopri = solve_ode_adaptive(field, x0, span, atol=cfg.dopri_tol, rtol=cfg.dopri_tol)
        metrics["err_dopri5"] = error(dopri.x)
        metrics["nfe_dopri5"] = float(dopri.nfe)
        x_data = mixture.sample_data(cfg.n_samples, generator=ctx.generator).to(ctx.device)
        with Timer(ctx.device) as tm:
            x_rk4 = solve_ode(field, x0, grids.uniform(steps[-1], dtype=dtype, device=ctx.device), method="rk4")
        metrics["rk4_seconds"] = tm.seconds
        metrics["sliced_w2_rk4_to_data"] = float(
            sliced_wasserstein(x_rk4, x_data, num_projections=128, generator=ctx.generator)
        )
        noise_floor = mixture.sample_data(cfg.n_samples, generator=ctx.generator).to(ctx.device)
        floor = float(sliced_wasserstein(noise_floor, x_data, num_projections=128, generator=ctx.generator))
    lines.update(base_lines)
    return BenchResult(
        metrics=metrics,
        baselines={"torchdiffeq fixed-grid": baseline, "data vs data (noise floor)": {"sliced_w2_rk4_to_data": floor}},
        references={"theory [exact]": {f"order_{m}": o for m, o in EXPECTED_ORDER.items()}},
        curves=[Curve("endpoint error vs NFE", "NFE", "mean |x - x_ref|", lines, logx=True, logy=True)],
        nfe={"dopri5": int(dopri.nfe)},
    )


SCENARIO = Scenario(
    name="core.solvers",
    package="core",
    method="solvers",
    run=run,
    variants={"smoke": SMOKE, "quick": QUICK, "full": FULL},
    directions={
        **{f"order_{m}": "max" for m in STAGES},
        "err_dopri5": "min",
        "nfe_dopri5": "min",
        "rk4_seconds": "min",
        "sliced_w2_rk4_to_data": "min",
    },
    description="Error vs NFE of euler/midpoint/heun/rk4/dopri5 on the exact 8-Gaussian CondOT field.",
    expected_seconds={"smoke": 1, "quick": 2, "full": 10},  # full: a guess for one GPU (16k float64 points)
    headline=True,
    # the tolerance of the core's own order test (`assert_convergence_order`, +- 0.25)
    claim=Claim("rk4's endpoint error falls at order 4 in NFE (slope >= 3.75)", "order_rk4", ">=", 3.75),
)
