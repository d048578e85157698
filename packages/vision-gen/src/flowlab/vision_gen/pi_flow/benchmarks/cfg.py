"""`vision.pi_flow.cfg`: quality against diversity along the classifier-free guidance scale. At each guidance the
teacher (50 Euler steps) and students distilled from the teacher guided that much (pi-Flow GM, DMD-lite, x0
regression), all at one NFE: precision, recall and digits-FD per guidance, drawn as recall against precision."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from flowlab.core.artifacts import Artifact
from flowlab.core.bench import BenchContext, BenchResult, Curve, Scenario, parallel_map
from flowlab.core.config import Config
from flowlab.vision_gen.kit.metrics import FeatureNetConfig
from flowlab.vision_gen.pi_flow.benchmarks.digits import (
    DIGITS,
    DigitsBench,
    digits_artifacts,
    distill_and_sample,
    noise_and_labels,
    teacher_samples,
)
from flowlab.vision_gen.pi_flow.evaluate import digits_measures

__all__ = ["CFG", "CFGBench"]


@dataclass(frozen=True)
class CFGBench(Config):
    """`digits` (teacher, student recipe, sample count, floor) with the students' and teacher's guidance replaced
    by each of `guidances`; `methods` sampled at `nfe` network calls, the teacher at `teacher_steps`. Quick leaves
    guidance 1 out: it is the headline scenario's run (the same seeds give the same numbers)."""

    digits: DigitsBench
    guidances: tuple[float, ...]
    methods: tuple[str, ...]
    nfe: int
    teacher_steps: int


def _at(cfg: CFGBench, guidance: float) -> DigitsBench:
    student = replace(cfg.digits.student, guidance=guidance)
    return replace(cfg.digits, student=student, nfes=(cfg.nfe,), teacher_steps=(cfg.teacher_steps,))


def run_cfg(ctx: BenchContext) -> BenchResult:
    cfg: CFGBench = ctx.config
    jobs = [(g, m) for g in cfg.guidances for m in cfg.methods]
    n = len(jobs)
    outs = parallel_map(distill_and_sample, [_at(cfg, g) for g, _ in jobs], [ctx.seed] * n, [m for _, m in jobs],
                        [ctx.device] * n, workers=cfg.digits.workers)  # fmt: skip
    _, labels = noise_and_labels(cfg.digits, ctx.seed)
    features = FeatureNetConfig(epochs=cfg.digits.feature_epochs)
    rows: dict[str, dict[str, float]] = {}
    lines: dict[str, tuple[list[float], list[float]]] = {}
    keys = ("fd", "precision", "recall", "entropy", "alignment")
    references = {g: teacher_samples(_at(cfg, g), ctx.seed, ctx.device)[cfg.teacher_steps] for g in cfg.guidances}
    samples = {("teacher", g): references[g] for g in cfg.guidances}
    samples |= {(m, g): out[cfg.nfe] for (g, m), out in zip(jobs, outs, strict=True)}
    for (row, g), x in samples.items():
        m = digits_measures(x, labels, references[g], repeats=cfg.digits.floor_repeats, seed=ctx.seed,
                            features=features)  # fmt: skip
        rows.setdefault(row, {}).update({f"{k}_g{g:g}": m[k] for k in keys})
    for row, values in rows.items():
        lines[row] = ([values[f"precision_g{g:g}"] for g in cfg.guidances],
                      [values[f"recall_g{g:g}"] for g in cfg.guidances])  # fmt: skip
    ours = rows.pop("piflow_gm")
    return BenchResult(
        metrics=ours,
        baselines=rows,
        curves=(Curve(f"recall against precision along the guidance {cfg.guidances}", "precision", "recall", lines),),
        nfe={"students": cfg.nfe, "teacher": cfg.teacher_steps},
    )


def _artifacts(cfg: CFGBench, device: torch.device) -> tuple[Artifact, ...]:
    return digits_artifacts(cfg.digits, device)


_QUICK = CFGBench(digits=DIGITS.variants["quick"], guidances=(2.0, 3.0), methods=("piflow_gm", "dmd_lite"),
                  nfe=2, teacher_steps=50)  # fmt: skip
_FULL = replace(_QUICK, digits=DIGITS.variants["full"], methods=("piflow_gm", "piflow_dx", "x0_regression", "dmd_lite"),
                guidances=(1.0, 1.5, 2.0, 3.0, 4.0))  # fmt: skip
_SMOKE = replace(_QUICK, digits=DIGITS.variants["smoke"], guidances=(1.0, 2.0), methods=("piflow_gm",), teacher_steps=4)

CFG = Scenario(
    name="vision.pi_flow.cfg",
    package="vision",
    method="pi_flow",
    run=run_cfg,
    variants={"smoke": _SMOKE, "quick": _QUICK, "full": _FULL},
    directions={
        f"{k}_g{g:g}": d
        for g in (1.0, 1.5, 2.0, 3.0, 4.0)
        for k, d in (("fd", "min"), ("precision", "max"), ("recall", "max"), ("entropy", "max"), ("alignment", "min"))
    },
    description="Quality against diversity along the CFG scale: the 50-step teacher and students distilled at each "
    "guidance (pi-Flow GM, DMD-lite), precision/recall/FD at NFE 2.",
    expected_seconds={"smoke": 5, "quick": 180, "full": 7200},  # quick: 180 s measured; full: a guess
    requires=_artifacts,
)
