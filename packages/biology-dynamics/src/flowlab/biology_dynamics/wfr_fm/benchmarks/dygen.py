"""`bio.wfr_fm.dygen`: the dyngen bifurcation (5-D, 5 times with shrinking and growing counts, δ = 2)."""

from __future__ import annotations

from flowlab.biology_dynamics.wfr_fm.benchmarks.compare import compare
from flowlab.biology_dynamics.wfr_fm.benchmarks.settings import DIRECTIONS, PAPER, WFRBench, quick, with_matching
from flowlab.biology_dynamics.wfr_fm.data import read_time_series_csv
from flowlab.biology_dynamics.wfr_fm.plot import plot_fit
from flowlab.core.bench import BenchContext, BenchResult, Scenario, require_file, torch_threads

__all__ = ["SCENARIO"]

FULL = with_matching(WFRBench(), delta=2.0)
QUICK = quick(FULL)

REFERENCES = {
    PAPER: {"w1_mean": 0.135},
    "TIGON [paper, unverified]": {"w1_mean": 0.512},
    "DeepRUOT [paper, unverified]": {"w1_mean": 0.623},
    "UOT-FM [paper, unverified]": {"w1_mean": 1.204},
}


def _run(ctx: BenchContext) -> BenchResult:
    cfg: WFRBench = ctx.config
    adata = read_time_series_csv(require_file(ctx.data_root, "single_cell", "dygen.csv"))
    with torch_threads(cfg.threads):
        result = compare(ctx, adata, cfg)
        title = "dygen: data by time, WFR-FM trajectories"
        plots = [plot_fit(result.wfr, adata, ctx.out_dir / "wfr_fm_dygen_trajectories_growth.png", title=title)]
    return BenchResult(
        metrics=result.ours, baselines=result.baselines, references=REFERENCES, curves=result.curves, plots=plots
    )


SCENARIO = Scenario(
    name="bio.wfr_fm.dygen",
    package="biology-dynamics",
    method="wfr_fm",
    run=_run,
    variants={"quick": QUICK, "full": FULL},
    directions=DIRECTIONS,
    tags=frozenset({"single_cell", "unbalanced_ot"}),
    description="Dyngen bifurcation (5-D, 5 times with shrinking and growing counts, δ=2).",
)
