"""`vision.patronus.shortcut`: the shortcut diagnosis. Patronus trained on the planted-shortcut digits (the kit's
bright 2x2 corner dot on every "0") and, as the control, on the clean digits, with the same encoder, recipe and
seed. The dot prototype (the one whose activation a dot raises most on validation digits other than 0) is boosted
to its maximum over the planted train set and the digits are regenerated with fixed noise; the kit's digits
classifier reads them. Rows: the share classified "0" before and after and its shift, per model; "found" when the
shortcut model's shift is at least `FOUND` and at least `FOUND` above the clean model's. The encoder's receptive
field is wider than the digits case's: a dot prototype whose field holds only the dot adds a dot and leaves the
digit's shape (RESULTS.md). Plot: `patronus_shortcut.png`, regenerations before and after the boost."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import torch

from flowlab.core.bench import BenchContext, BenchResult, Scenario, parallel_map
from flowlab.core.config import Config
from flowlab.vision_gen.kit.data import load_digits_images
from flowlab.vision_gen.kit.metrics import feature_net_artifact
from flowlab.vision_gen.kit.quality import strip_figure
from flowlab.vision_gen.kit.shortcuts import plant_shortcut
from flowlab.vision_gen.patronus.benchmarks.digits import FULL_MODEL
from flowlab.vision_gen.patronus.evaluate import conditions, prototype_diversity
from flowlab.vision_gen.patronus.explain import dot_prototype, shortcut_shift
from flowlab.vision_gen.patronus.model import ModelConfig
from flowlab.vision_gen.patronus.train import TrainConfig, train_patronus

__all__ = ["FOUND", "SHORTCUT", "ShortcutBench"]

#: the runs: trained on the planted-shortcut digits (ours), on the clean digits (the control)
RUNS = ("shortcut", "clean")
#: the shift towards "0" a boosted dot prototype must cause on the shortcut model (and exceed the clean model's by)
FOUND = 0.1


@dataclass(frozen=True)
class ShortcutBench(Config):
    """Both runs are Patronus `model`s trained by `train` with the scenario's seed; the dot prototype is boosted on
    `explain_n` validation digits other than 0, regenerated in `sample_steps` DDIM steps; up to `workers`
    processes."""

    model: ModelConfig
    train: TrainConfig
    sample_steps: int
    explain_n: int
    workers: int

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 2 <= self.explain_n <= 243:
            raise ValueError(f"explain_n: expected 2..243 (non-zero val digits), got {self.explain_n}")


def _job(cfg: ShortcutBench, seed: int, run: str, device: torch.device) -> dict:
    """Train one run and diagnose it (seeded by the scenario's seed alone: both runs see the same batches)."""
    torch.set_num_threads(1)
    size = cfg.model.size
    train, val = load_digits_images(size, split="train"), load_digits_images(size, split="val")
    planted = plant_shortcut(train)
    start = time.perf_counter()
    model = train_patronus(cfg.model, replace(cfg.train, seed=seed), (planted if run == "shortcut" else train).x,
                           device=device)  # fmt: skip
    seconds = time.perf_counter() - start
    others = val.x[val.y != 0][: cfg.explain_n].to(device)
    noise = torch.randn(others.shape, generator=torch.Generator().manual_seed(seed + 7)).to(device)
    target = conditions(model, planted.x.to(device)).max(0).values
    j, rise = dot_prototype(model, others)
    shift, before, after = shortcut_shift(model, others, noise, j, float(target[j]), steps=cfg.sample_steps)
    metrics = shift | {"dot_prototype": float(j), "dot_rise": float(rise[j]), "train_seconds": seconds}
    return {"run": run, "metrics": metrics | prototype_diversity(model), "strip": torch.stack([before[:10],
            after[:10]]).cpu()}  # fmt: skip


def run_shortcut(ctx: BenchContext) -> BenchResult:
    cfg: ShortcutBench = ctx.config
    outs = parallel_map(_job, [cfg] * 2, [ctx.seed] * 2, list(RUNS), [ctx.device] * 2, workers=cfg.workers)
    rows = {out["run"]: out["metrics"] for out in outs}
    strips = {out["run"]: out["strip"] for out in outs}
    strip_figure(ctx.out_dir / "patronus_shortcut.png", {
        "shortcut model, regenerated": strips["shortcut"][0],
        "shortcut model, dot prototype boosted": strips["shortcut"][1],
        "clean model, regenerated": strips["clean"][0],
        "clean model, dot prototype boosted": strips["clean"][1],
    })  # fmt: skip
    clean, shift = rows["clean"], rows["shortcut"]["shift"]
    ours = {"found": float(shift >= FOUND and shift - clean["shift"] >= FOUND)} | rows["shortcut"]
    return BenchResult(metrics=ours, baselines={"clean": clean}, plots=(ctx.out_dir / "patronus_shortcut.png",))


def _artifacts(cfg: ShortcutBench, device: torch.device):
    return (feature_net_artifact(),)


# the quick encoder: kernels 3, 3, 1 (5x5 fields on 8x8 digits, 4x4 cells); the digits case's 3x3 fields hold the
# dot alone
_QUICK = ShortcutBench(model=ModelConfig(size=8, num_prototypes=16, enc_kernels=(3, 3, 1)),
                       train=TrainConfig(steps=1200, batch_size=64, lr=1e-3), sample_steps=20, explain_n=64,
                       workers=2)  # fmt: skip
_FULL = replace(_QUICK, model=FULL_MODEL, train=TrainConfig(steps=20_000, batch_size=128, lr=1e-3), sample_steps=50,
                explain_n=200, workers=1)  # fmt: skip
# the full encoder and model at 16x16 (7x7 fields) with a CPU-sized budget: both runs side by side on 2 cores
_CPU = replace(_FULL, train=TrainConfig(steps=4000, batch_size=64, lr=1e-3), workers=2)
_SMOKE = replace(_QUICK, model=ModelConfig(size=8, num_prototypes=4, enc_channels=(8, 8), enc_kernels=(3, 3),
                 enc_strides=(1, 1), enc_paddings=(0, 0), base_channels=8), train=TrainConfig(steps=2, batch_size=8),
                 sample_steps=2, explain_n=8, workers=1)  # fmt: skip

SHORTCUT = Scenario(
    name="vision.patronus.shortcut",
    package="vision",
    method="patronus",
    run=run_shortcut,
    variants={"smoke": _SMOKE, "quick": _QUICK, "cpu": _CPU, "full": _FULL},
    directions={"shift": "max", "found": "max"},
    description="8x8 digits with a planted corner dot on every 0: boosting Patronus's dot prototype turns "
    "regenerated digits into 0s on the shortcut model, not on a clean model of the same encoder.",
    expected_seconds={"smoke": 10, "quick": 150, "cpu": 1800, "full": 2400},  # cpu 1617-1936 s
    requires=_artifacts,
)
