"""`core.sampler_overhead`: `solve_ode` against a bare Python loop of the same network calls and against
flow_matching's `ODESolver`, on a batch of 4096 points through a 4x256 MLP (target: within 1.05x of the bare loop)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from flowlab.core import grids
from flowlab.core.bench import BenchContext, BenchResult, Claim, Scenario
from flowlab.core.benchmarks.timing import fastest_seconds
from flowlab.core.config import Config
from flowlab.core.distributions import randn
from flowlab.core.nets import TimeMLP
from flowlab.core.solvers import solve_ode


@dataclass(frozen=True)
class SamplerOverheadBench(Config):
    """Batch, grid steps and best-of repeats of the timing."""

    batch: int = 4096
    steps: int = 64
    repeats: int = 7


FULL = SamplerOverheadBench()
QUICK = replace(FULL, steps=8, repeats=5)
SMOKE = replace(QUICK, batch=256, steps=4, repeats=1)


def _bare_euler(net, x, ts):
    for i in range(len(ts) - 1):
        x = x + (ts[i + 1][0] - ts[i][0]) * net(x=x, t=ts[i])
    return x


def _bare_midpoint(net, x, ts, mids):
    for i in range(len(ts) - 1):
        h = ts[i + 1][0] - ts[i][0]
        x = x + h * net(x=x + 0.5 * h * net(x=x, t=ts[i]), t=mids[i])
    return x


def _bare_heun(net, x, ts):
    for i in range(len(ts) - 1):
        h = ts[i + 1][0] - ts[i][0]
        k1 = net(x=x, t=ts[i])
        k2 = net(x=x + h * k1, t=ts[i + 1])
        x = x + 0.5 * h * (k1 + k2)
    return x


def run(ctx: BenchContext) -> BenchResult:
    """Best-of wall time of `solve_ode` (euler, midpoint, heun) against the same bare loops and flow_matching's
    `ODESolver` (when installed), on x0: (batch, 2) through a 4x256 MLP; and whether heun matches its bare loop."""
    cfg: SamplerOverheadBench = ctx.config
    torch.manual_seed(ctx.seed)
    net = TimeMLP(2, hidden=(256,) * 4).to(ctx.device).eval()
    x0 = randn((cfg.batch, 2), generator=ctx.generator).to(ctx.device)
    n = cfg.steps
    grid = grids.uniform(n, device=ctx.device)
    ts = [grid[i].expand(cfg.batch).contiguous() for i in range(n + 1)]
    mids = [(0.5 * (grid[i] + grid[i + 1])).expand(cfg.batch).contiguous() for i in range(n)]

    candidates = {
        **{f"ours_{m}": (lambda m=m: solve_ode(net, x0, grid, method=m)) for m in ("euler", "midpoint", "heun")},
        "bare_euler": lambda: _bare_euler(net, x0, ts),
        "bare_midpoint": lambda: _bare_midpoint(net, x0, ts, mids),
        "bare_heun": lambda: _bare_heun(net, x0, ts),
    }
    try:
        from flow_matching.solver import ODESolver
    except ImportError:  # the `bench` dependency group is not installed
        ODESolver = None
    if ODESolver is not None:
        solver = ODESolver(velocity_model=lambda x, t: net(x=x, t=t.expand(x.shape[0])))
        span = torch.tensor([0.0, 1.0], device=ctx.device)
        for m in ("euler", "midpoint"):
            candidates[f"fm_{m}"] = lambda m=m: solver.sample(x_init=x0, step_size=1.0 / n, method=m, time_grid=span)
    with torch.inference_mode():
        best = fastest_seconds(candidates, device=ctx.device, repeats=cfg.repeats)
        # the overhead comparison is between identical computations
        same = torch.allclose(solve_ode(net, x0, grid, method="heun"), _bare_heun(net, x0, ts), atol=1e-5)
    metrics: dict[str, float] = {"matches_bare_loop": float(same)}
    bare: dict[str, float] = {}
    fm: dict[str, float] = {}
    for m in ("euler", "midpoint", "heun"):
        metrics[f"{m}_ms"] = 1e3 * best[f"ours_{m}"]
        bare[f"{m}_ms"] = 1e3 * best[f"bare_{m}"]
        metrics[f"{m}_overhead_vs_bare"] = best[f"ours_{m}"] / best[f"bare_{m}"]
        if f"fm_{m}" in best:
            fm[f"{m}_ms"] = 1e3 * best[f"fm_{m}"]
            fm[f"{m}_overhead_vs_bare"] = best[f"fm_{m}"] / best[f"bare_{m}"]
    baselines = {"bare python loop": bare}
    if fm:
        baselines["flow_matching ODESolver"] = fm
    return BenchResult(
        metrics=metrics,
        baselines=baselines,
        references={"target [spec]": {f"{m}_overhead_vs_bare": 1.05 for m in ("euler", "midpoint", "heun")}},
        nfe={"euler": n, "midpoint": 2 * n, "heun": 2 * n},
    )


SCENARIO = Scenario(
    name="core.sampler_overhead",
    package="core",
    method="solve_ode",
    run=run,
    variants={"smoke": SMOKE, "quick": QUICK, "full": FULL},
    directions={
        **{f"{m}_ms": "min" for m in ("euler", "midpoint", "heun")},
        **{f"{m}_overhead_vs_bare": "min" for m in ("euler", "midpoint", "heun")},
        "matches_bare_loop": "max",
    },
    description="Per-solve wall time of solve_ode vs a bare loop and flow_matching's ODESolver (batch 4096, MLP).",
    expected_seconds={"smoke": 2, "quick": 8, "full": 15},  # full: a guess for one GPU
    headline=True,
    claim=Claim("solve_ode euler within 1.05x of the bare loop", "euler_overhead_vs_bare", "<=", 1.05),
)
