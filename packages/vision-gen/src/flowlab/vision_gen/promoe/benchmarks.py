"""`vision.promoe.digits` (the headline): ProMoE against a dense DiT, token-choice and expert-choice MoE (quick);
`cpu` adds DiffMoE-lite and ProMoE's ablations (no RCL, no conditional routing, softmax / sigmoid gates, no shared
expert, k-means routing); every run at equal activated parameters, trained by the same recipe on the 8x8 digits
(rectified flow; full: 16x16, every run, plus DDPM-objective runs). Each run's digits-FD and class accuracy at CFG
1.0 and 1.5 and its routing (expert-class NMI at t in {0.2, 0.5, 0.8}, JS divergence of digits 0-4 against 5-9,
utilisation entropy, dead experts, experts per token, expert subspace similarity, null-label tokens to the
unconditional expert); the routing heat maps of ProMoE and token choice in `promoe_routing.png`, every run's metrics
and routing tables in `promoe_runs.json`."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace

import torch

from flowlab.core.bench import BenchContext, BenchResult, Claim, Scenario, parallel_map
from flowlab.core.config import Config
from flowlab.vision_gen.kit.data import load_digits_images
from flowlab.vision_gen.kit.metrics import feature_net_artifact
from flowlab.vision_gen.promoe.analysis import routing_heatmap
from flowlab.vision_gen.promoe.evaluate import routing_analysis, sample_quality
from flowlab.vision_gen.promoe.model import ModelConfig
from flowlab.vision_gen.promoe.names import OBJECTIVES, VARIANTS
from flowlab.vision_gen.promoe.train import TrainConfig, train_promoe

__all__ = ["DIGITS", "DigitsBench"]


@dataclass(frozen=True)
class DigitsBench(Config):
    """The `runs` ("<variant>" or "<variant>/<objective>", the first is ours), each a `model` of that variant
    trained by `train` (objective set per run) with the scenario's seed; quality of `n` samples in `sample_steps`
    steps at each of `cfg_scales`; routing of `analysis_n` validation digits; up to `workers` processes."""

    model: ModelConfig
    train: TrainConfig
    runs: tuple[str, ...]
    n: int
    sample_steps: int
    cfg_scales: tuple[float, ...]
    analysis_n: int
    workers: int

    def __post_init__(self) -> None:
        super().__post_init__()
        for run in self.runs:
            variant, _, objective = run.partition("/")
            if variant not in VARIANTS or (objective and objective not in OBJECTIVES):
                raise ValueError(f"runs: expected <variant>[/<objective>] with variant in {VARIANTS} and objective "
                                 f"in {OBJECTIVES}, got {run!r}")  # fmt: skip


def _key(name: str, scale: float) -> str:
    return f"{name}_cfg{scale:g}".replace(".", "p")


def _job(cfg: DigitsBench, seed: int, run: str, device: torch.device) -> dict:
    """Train and measure one run, seeded by the scenario's seed alone (every run sees the same batches)."""
    torch.set_num_threads(1)
    variant, _, objective = run.partition("/")
    model_config = replace(cfg.model, variant=variant)
    config = replace(cfg.train, objective=objective or cfg.train.objective, seed=seed)
    data = load_digits_images(model_config.size, split="train")
    start = time.perf_counter()
    model = train_promoe(model_config, config, data.x, data.y, device=device)
    row = {"train_seconds": time.perf_counter() - start}
    for scale in cfg.cfg_scales:
        quality = sample_quality(model, n=cfg.n, objective=config.objective, steps=cfg.sample_steps,
                                 cfg_scale=scale, seed=seed)  # fmt: skip
        row |= {_key(name, scale): value for name, value in quality.items() if name != "fd_floor"}
        row["fd_floor"] = quality["fd_floor"]
    val = load_digits_images(model_config.size, split="val")
    routing = routing_analysis(model, val.x[: cfg.analysis_n].to(device), val.y[: cfg.analysis_n].to(device),
                               objective=config.objective, seed=seed)  # fmt: skip
    row |= routing.metrics
    row["seconds"] = time.perf_counter() - start
    return {"run": run, "metrics": row, "tables": {k: v.tolist() for k, v in routing.tables.items()}}


def run_digits(ctx: BenchContext) -> BenchResult:
    cfg: DigitsBench = ctx.config
    k = len(cfg.runs)
    outs = parallel_map(_job, [cfg] * k, [ctx.seed] * k, list(cfg.runs), [ctx.device] * k, workers=cfg.workers)
    rows = {out["run"]: out["metrics"] for out in outs}
    (ctx.out_dir / "promoe_runs.json").write_text(json.dumps(outs, indent=1))
    tables = {out["run"]: out["tables"] for out in outs if out["tables"] and out["run"] in ("promoe", "tc")}
    plots = []
    if tables:
        last = {run: max(int(name.split("@")[0]) for name in t) for run, t in tables.items()}
        heat = {f"{run}, block {last[run]}, t=0.5": torch.tensor(t[f"{last[run]}@t=0.5"]) for run, t in tables.items()}
        routing_heatmap(ctx.out_dir / "promoe_routing.png", heat)
        plots.append(ctx.out_dir / "promoe_routing.png")
    ours = rows.pop(cfg.runs[0])
    return BenchResult(
        metrics=ours,
        baselines=rows,
        references={
            "Dense-DiT-B-Flow, ImageNet 256 FID-50K [paper]": {"fd_cfg1": 30.61, "fd_cfg1p5": 9.02},
            "ProMoE-B-Flow, ImageNet 256 FID-50K [paper]": {"fd_cfg1": 24.44, "fd_cfg1p5": 6.39},
            "ProMoE-B ablation, + prototypical routing [paper]": {"fd_cfg1": 27.93},
            "ProMoE-B ablation, + RCL [paper]": {"fd_cfg1": 24.97},
            "DiT-MoE-L (token choice) [paper]": {"fd_cfg1": 16.57, "fd_cfg1p5": 4.10},
            "EC-DiT-L (expert choice) [paper]": {"fd_cfg1": 15.58, "fd_cfg1p5": 3.65},
            "DiffMoE-L-E8 [paper]": {"fd_cfg1": 14.46, "fd_cfg1p5": 3.51},
            "ProMoE-L-Flow [paper]": {"fd_cfg1": 11.61, "fd_cfg1p5": 2.79},
        },
        plots=tuple(plots),
    )


def _artifacts(cfg: DigitsBench, device: torch.device):
    return (feature_net_artifact(),)


_CPU = DigitsBench(
    model=ModelConfig(size=8, dim=64, depth=4, heads=4, num_routed=6),
    train=TrainConfig(steps=400, batch_size=64, lr=2e-3),
    runs=VARIANTS,  # ProMoE first
    n=300,
    sample_steps=20,
    cfg_scales=(1.0, 1.5),
    analysis_n=270,
    workers=2,
)
# quick: the headline's comparisons alone (the same runs as cpu's rows of these variants, seeded alike)
_QUICK = replace(_CPU, runs=("promoe", "dense", "tc", "ec"))
_FULL = replace(_CPU, model=ModelConfig(size=16, dim=128, depth=6, heads=4, num_routed=6),
                train=TrainConfig(steps=20_000, batch_size=256, lr=1e-3), runs=(*VARIANTS, "promoe/ddpm", "dense/ddpm"),
                n=1000, sample_steps=50)  # fmt: skip
_SMOKE = replace(_CPU, model=ModelConfig(size=8, dim=16, depth=2, heads=2, num_routed=3),
                 train=TrainConfig(steps=2, batch_size=8), runs=(*VARIANTS, "promoe/ddpm"), n=20, sample_steps=2,
                 analysis_n=20, workers=1)  # fmt: skip

_ROUTING_MAX = ("nmi", "nmi_t0p2", "nmi_t0p5", "nmi_t0p8", "nmi_block1", "nmi_block3", "nmi_block5", "js_divergence",
                "utilisation_entropy", "null_to_uncond")  # fmt: skip
DIGITS = Scenario(
    name="vision.promoe.digits",
    package="vision",
    method="promoe",
    run=run_digits,
    variants={"smoke": _SMOKE, "quick": _QUICK, "cpu": _CPU, "full": _FULL},
    directions={
        "fd_cfg1": "min",
        "fd_cfg1p5": "min",
        "dead_experts": "min",
        "subspace_similarity": "min",
        "accuracy_cfg1": "max",
        "accuracy_cfg1p5": "max",
    }
    | {key: "max" for key in _ROUTING_MAX},
    description="8x8 digits, rectified flow: ProMoE vs dense DiT, token-choice and expert-choice MoE at equal "
    "activated parameters (cpu adds DiffMoE-lite and ProMoE without RCL, without conditional routing, with softmax / "
    "sigmoid gates, without the shared expert, with k-means routing); digits-FD and accuracy at CFG 1.0 / 1.5, "
    "expert-class NMI, subset JS divergence, expert subspace similarity.",
    expected_seconds={"smoke": 10, "quick": 45, "cpu": 150, "full": 5400},  # quick 40-41 s, cpu 181-187 s (loaded)
    headline=True,
    claim=Claim(
        "ProMoE's expert-class NMI above token-choice MoE's (explicit routing guidance specialises experts)",
        "nmi",
        ">",
        1.0,
        baseline="tc",
    ),
    requires=_artifacts,
)

SCENARIOS = (DIGITS,)
