"""`bio.wright_fisher.motifs`: class-conditional DNA with real JASPAR motifs planted in random backgrounds.

Each method trains the same class-conditional `SequenceCNN` on fresh draws of the task (1-3 sites of the class's
motif in a uniform background), then samples `samples` sequences of balanced classes. Metrics: the motif hit rate
(share of sampled sequences whose best site of their class motif passes 0.7 x the PWM maximum); the profile error
(the oracle profile is the windowed two-strand PWM scan of every class motif; per class, the squared error of the
samples' mean profile against that of a reference draw of the data, averaged); the ELBO in nats per position
(likelihood models); the training NaN rate. Held-out data and the uniform background are the reference rows;
held-out data's profile error is the floor.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch

from flowlab.biology_dynamics.wright_fisher.baselines import DDSMLite, DirichletFM
from flowlab.biology_dynamics.wright_fisher.benchmarks.training import train_method
from flowlab.biology_dynamics.wright_fisher.discrete import DiscreteDomain
from flowlab.biology_dynamics.wright_fisher.dna import ALPHABET
from flowlab.biology_dynamics.wright_fisher.motifs import (
    MotifTask,
    hit_rate,
    load_motifs,
    profile,
    sample_motif_sequences,
)
from flowlab.biology_dynamics.wright_fisher.nets import SequenceCNN
from flowlab.biology_dynamics.wright_fisher.unified import domain
from flowlab.core.bench import BenchContext, BenchResult, Scenario
from flowlab.core.config import Config

__all__ = ["SCENARIO"]

LETTERS = len(ALPHABET)


@dataclass(frozen=True)
class MotifsBench(Config):
    """The task (`length`, `classes`); `steps` of `batch` sequences at `lr` for a CNN of `width` channels and
    `stacks` dilation stacks; `samples` sampled sequences with `sample_steps` steps; the ELBO over `elbo_sequences`
    held-out sequences with `elbo_draws` time draws; profiles over windows of `window` letters."""

    length: int = 100
    classes: int = 2
    steps: int = 1500
    batch: int = 64
    lr: float = 2e-3
    width: int = 32
    stacks: int = 1
    samples: int = 256
    sample_steps: int = 100
    elbo_sequences: int = 256
    elbo_draws: int = 4
    window: int = 20


QUICK = MotifsBench()
FULL = replace(QUICK, length=200, classes=8, steps=20_000, batch=128, width=128, stacks=4, samples=2048,
               sample_steps=500, elbo_sequences=2048)  # fmt: skip
SMOKE = replace(QUICK, steps=10, samples=16, sample_steps=4, elbo_sequences=16, elbo_draws=1)


def _methods(cfg: MotifsBench) -> dict[str, tuple[Any, int]]:
    """name -> (method, input channels of its network)."""
    return {
        "Wright-Fisher": (domain("simplicial", LETTERS), LETTERS),
        "uniform discrete": (domain("discrete", LETTERS), LETTERS),
        "masked (MDLM)": (DiscreteDomain(LETTERS, kind="masked"), LETTERS + 1),
        "Dirichlet FM": (DirichletFM(LETTERS), LETTERS),
        # DDSM's own smallest time: t = 0.01 in its speed-balanced clock, tau = 2 t / K
        "DDSM-lite": (DDSMLite(LETTERS, tau_min=0.02 / LETTERS), LETTERS),
    }


def _scores(cfg: MotifsBench, x: torch.Tensor, labels: torch.Tensor, motifs, means: torch.Tensor) -> dict:
    """Hit rate, and the squared error of each class's mean oracle profile against the reference's, averaged over
    classes, motifs and windows."""
    oracle = profile(x.cpu(), motifs, window=cfg.window)
    mine = torch.stack([oracle[labels.cpu() == c].mean(0) for c in range(cfg.classes)])
    return {"hit_rate": hit_rate(x.cpu(), labels.cpu(), motifs), "profile_mse": float(((mine - means) ** 2).mean())}


def _run(ctx: BenchContext) -> BenchResult:
    cfg: MotifsBench = ctx.config
    task = MotifTask(length=cfg.length, classes=cfg.classes, seed=ctx.seed)
    motifs = load_motifs(task.motifs[: cfg.classes], release=task.release)
    held_out, held_labels = sample_motif_sequences(task, cfg.elbo_sequences, generator=ctx.generator)
    reference, ref_labels = sample_motif_sequences(task, cfg.samples, generator=ctx.generator)
    ref_profile = profile(reference, motifs, window=cfg.window)
    means = torch.stack([ref_profile[ref_labels == c].mean(0) for c in range(cfg.classes)])
    labels = torch.arange(cfg.samples) % cfg.classes
    background = torch.randint(LETTERS, (cfg.samples, cfg.length), generator=ctx.generator)
    rows = {
        "held-out data": _scores(cfg, held_out[: cfg.samples], held_labels[: cfg.samples], motifs, means),
        "uniform background": _scores(cfg, background, labels, motifs, means),
    }
    data = lambda step, gen: _batch(task, cfg.batch, gen, ctx.device)  # noqa: E731
    for name, (method, channels) in _methods(cfg).items():
        net = SequenceCNN(LETTERS, channels=channels, width=cfg.width, stacks=cfg.stacks, classes=cfg.classes)
        nan_rate, seconds = train_method(ctx, net, method.loss_fn, data, steps=cfg.steps, lr=cfg.lr)
        cond = {"cond": labels.to(ctx.device)}
        x = method.sample(net, cfg.samples, cfg.length, steps=cfg.sample_steps, generator=ctx.generator,
                          device=ctx.device, cond=cond)  # fmt: skip
        row = _scores(cfg, x, labels, motifs, means)
        if hasattr(method, "elbo"):
            elbo_cond = {"cond": held_labels.to(ctx.device)}
            row["nats"] = method.elbo(net, held_out.to(ctx.device), generator=ctx.generator, draws=cfg.elbo_draws,
                                      cond=elbo_cond)["nats"]  # fmt: skip
        row["nan_rate"], row["train_s"] = nan_rate, seconds
        rows[name] = row
    return BenchResult(metrics=rows.pop("Wright-Fisher"), baselines=rows)


def _batch(task: MotifTask, n: int, generator: torch.Generator, device) -> tuple[torch.Tensor, dict]:
    """A fresh training batch (x_0 (n, L), {"cond": labels (n,)}) on `device`, drawn on the CPU."""
    seed = int(torch.randint(2**62, (1,), generator=generator, device=generator.device))
    x, labels = sample_motif_sequences(task, n, generator=torch.Generator().manual_seed(seed))
    return x.to(device), {"cond": labels.to(device)}


SCENARIO = Scenario(
    name="bio.wright_fisher.motifs",
    package="biology-dynamics",
    method="wright_fisher",
    run=_run,
    variants={"smoke": SMOKE, "quick": QUICK, "full": FULL},
    expected_seconds={"smoke": 15, "quick": 900, "full": 14_400},
    directions={"hit_rate": "max", "profile_mse": "min", "nats": "min", "nan_rate": "min"},
    tags=frozenset({"dna", "conditional", "motifs"}),
    description="Class-conditional DNA with planted JASPAR motifs: hit rate, profile error, ELBO for each method.",
)
