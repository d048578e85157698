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

import torch

from flowlab.biology_dynamics.wright_fisher.benchmarks.training import train_method
from flowlab.biology_dynamics.wright_fisher.dna import ALPHABET
from flowlab.biology_dynamics.wright_fisher.motifs import MotifTask, hit_rate, load_motifs, motif_batch, profile
from flowlab.biology_dynamics.wright_fisher.run import DNARun, method_of, network, training_batch, training_loss
from flowlab.biology_dynamics.wright_fisher.unified import DOMAINS
from flowlab.core.bench import BenchContext, BenchResult, Scenario
from flowlab.core.config import Config

__all__ = ["SCENARIO"]

LETTERS = len(ALPHABET)


@dataclass(frozen=True)
class MotifsBench(Config):
    """The task (`length`, `classes`); `steps` of `batch` sequences at `lr` for a CNN of `width` channels and
    `stacks` dilation stacks; `samples` sampled sequences with `sample_steps` steps; the ELBO over `elbo_sequences`
    held-out sequences with `elbo_draws` time draws; profiles over windows of `window` letters."""

    length: int = 60
    classes: int = 2
    steps: int = 600
    batch: int = 32
    lr: float = 2e-3
    width: int = 32
    stacks: int = 1
    samples: int = 128
    sample_steps: int = 50
    elbo_sequences: int = 128
    elbo_draws: int = 2
    window: int = 20


QUICK = MotifsBench()
# cpu: ten times quick's training, where the unified model first met every single-domain model (RESULTS.md)
CPU = replace(QUICK, steps=6000)
FULL = replace(QUICK, length=200, classes=8, steps=20_000, batch=128, width=128, stacks=4, samples=2048,
               sample_steps=500, elbo_sequences=2048, elbo_draws=8)  # fmt: skip
SMOKE = replace(QUICK, steps=10, samples=16, sample_steps=4, elbo_sequences=16, elbo_draws=1)


#: row name -> the `DNARun` domain that trains it
METHODS = {
    "Wright-Fisher": "simplicial",
    "uniform discrete": "discrete",
    "masked (MDLM)": "masked",
    "Gaussian (VP, embedding)": "gaussian",
    "Dirichlet FM": "dirichlet-fm",
    "DDSM-lite": "ddsm-lite",
    "unified SSP": "unified",
}


def _scores(cfg: MotifsBench, x: torch.Tensor, labels: torch.Tensor, motifs, means: torch.Tensor) -> dict:
    """Hit rate, and the squared error of each class's mean oracle profile against the reference's, averaged over
    classes, motifs and windows."""
    oracle = profile(x.cpu(), motifs, window=cfg.window)
    mine = torch.stack([oracle[labels.cpu() == c].mean(0) for c in range(cfg.classes)])
    return {"hit_rate": hit_rate(x.cpu(), labels.cpu(), motifs), "profile_mse": float(((mine - means) ** 2).mean())}


def _evaluate(ctx: BenchContext, method, net, labels, held, oracle) -> dict[str, float]:
    """Sample `labels`' classes and score them against the oracle (motifs, class-mean profiles); the ELBO on the
    held-out (sequences, labels) for likelihood models."""
    cfg: MotifsBench = ctx.config
    x = method.sample(net, cfg.samples, cfg.length, steps=cfg.sample_steps, generator=ctx.generator,
                      device=ctx.device, cond={"cond": labels.to(ctx.device)})  # fmt: skip
    row = _scores(cfg, x, labels, *oracle)
    if hasattr(method, "elbo"):
        x_0, cond = held[0].to(ctx.device), {"cond": held[1].to(ctx.device)}
        elbo = method.elbo(net, x_0, generator=ctx.generator, draws=cfg.elbo_draws, cond=cond)
        row["nats"], row["nats_se"] = elbo["nats"], elbo["diffusion_se"]
    return row


def _run(ctx: BenchContext) -> BenchResult:
    cfg: MotifsBench = ctx.config
    task = MotifTask(length=cfg.length, classes=cfg.classes, seed=ctx.seed)
    motifs = load_motifs(task.motifs[: cfg.classes], release=task.release)
    held_out, held_labels = motif_batch(task, cfg.elbo_sequences, generator=ctx.generator)
    reference, ref_labels = motif_batch(task, cfg.samples, generator=ctx.generator)
    ref_profile = profile(reference, motifs, window=cfg.window)
    means = torch.stack([ref_profile[ref_labels == c].mean(0) for c in range(cfg.classes)])
    labels = torch.arange(cfg.samples) % cfg.classes
    background = torch.randint(LETTERS, (cfg.samples, cfg.length), generator=ctx.generator, device=ctx.device)
    rows = {
        "held-out data": _scores(cfg, held_out[: cfg.samples], held_labels[: cfg.samples], motifs, means),
        "uniform background": _scores(cfg, background, labels, motifs, means),
    }
    for name, kind in METHODS.items():
        run = DNARun(task="motifs", domain=kind, length=cfg.length, classes=cfg.classes, steps=cfg.steps,
                     batch=cfg.batch, lr=cfg.lr, width=cfg.width, stacks=cfg.stacks, seed=ctx.seed)  # fmt: skip
        data = lambda step, gen, run=run: training_batch(run, cfg.batch, gen, ctx.device)  # noqa: E731
        net = network(run)
        nan_rate, seconds = train_method(ctx, net, training_loss(run), data, steps=cfg.steps, lr=cfg.lr)
        for sample_domain in DOMAINS if kind == "unified" else (None,):
            row = _evaluate(ctx, method_of(run, sample_domain), net, labels, (held_out, held_labels), (motifs, means))
            row["nan_rate"], row["train_s"] = nan_rate, seconds
            rows[name if sample_domain is None else f"{name}, {sample_domain}"] = row
    return BenchResult(metrics=rows.pop("Wright-Fisher"), baselines=rows)


SCENARIO = Scenario(
    name="bio.wright_fisher.motifs",
    package="biology-dynamics",
    method="wright_fisher",
    run=_run,
    variants={"smoke": SMOKE, "quick": QUICK, "cpu": CPU, "full": FULL},
    expected_seconds={"smoke": 15, "quick": 180, "cpu": 540, "full": 14_400},
    directions={"hit_rate": "max", "profile_mse": "min", "nats": "min", "nan_rate": "min"},
    tags=frozenset({"dna", "conditional", "motifs"}),
    description="Class-conditional DNA with planted JASPAR motifs: hit rate, profile error, ELBO for each method.",
)
