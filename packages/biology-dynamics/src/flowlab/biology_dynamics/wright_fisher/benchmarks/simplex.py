"""`bio.wright_fisher.simplex` (K = 4 and 20, the headline) and `bio.wright_fisher.simplex100` (K = 100): every
method of the comparison on toy categorical targets over K letters, one table.

Target: `length` independent positions, each a seeded Dirichlet(0.5) categorical over K letters (the same at every
position). Per method and K: the negative ELBO in nats per position (for the likelihood models), KL(empirical ||
target) of the per-position letter frequencies from `samples` draws, and the training NaN rate (the share of batch
sequences whose loss was not finite). Every method trains the same `SequenceMLP` size for the same steps;
Wright-Fisher's is hollow (the exact model of independent positions needs no look at the own position), the
unified model is one time-free network trained on all three domains with the sufficient-statistic input.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch

from flowlab.biology_dynamics.wright_fisher.benchmarks.training import train_method
from flowlab.biology_dynamics.wright_fisher.run import DNARun, method_of, network, training_batch, training_loss
from flowlab.biology_dynamics.wright_fisher.toy import categorical_target, empirical_kl, sample_categorical
from flowlab.biology_dynamics.wright_fisher.unified import DOMAINS
from flowlab.core.bench import BenchContext, BenchResult, Claim, Scenario
from flowlab.core.config import Config

__all__ = ["SCENARIO", "SCENARIO_100"]

OURS = "Wright-Fisher"
MDLM = "masked (MDLM)"


@dataclass(frozen=True)
class SimplexBench(Config):
    """Targets over each of `letters`; `length` positions; `steps` training steps of `batch` sequences at `lr`
    for an MLP of two hidden layers of `width`; `samples` sampled sequences with `sample_steps` steps; the ELBO over
    `elbo_sequences` held-out sequences with `elbo_draws` time draws each."""

    letters: tuple[int, ...] = (4, 20)
    length: int = 2
    steps: int = 1000
    batch: int = 128
    lr: float = 2e-3
    width: int = 128
    samples: int = 2000
    sample_steps: int = 50
    elbo_sequences: int = 1000
    elbo_draws: int = 8


QUICK = SimplexBench()
FULL = replace(QUICK, length=4, steps=6000, samples=10_000, sample_steps=200)
SMOKE = replace(QUICK, letters=(4,), steps=20, samples=100, sample_steps=5, elbo_sequences=50, elbo_draws=1)


#: row name -> the `DNARun` domain that trains it (all on the toy task's `SequenceMLP`, hollow for Wright-Fisher)
METHODS = {
    OURS: "simplicial",
    "uniform discrete": "discrete",
    MDLM: "masked",
    "Gaussian (VP, embedding)": "gaussian",
    "Dirichlet FM": "dirichlet-fm",
    "linear simplex FM": "linear-fm",
    "DDSM-lite": "ddsm-lite",
    "unified SSP": "unified",
}


def _score(ctx: BenchContext, method: Any, net, probs, held_out) -> dict[str, float]:
    cfg: SimplexBench = ctx.config
    out = {}
    if hasattr(method, "elbo"):
        elbo = method.elbo(net, held_out, generator=ctx.generator, draws=cfg.elbo_draws)
        out["nats"], out["nats_se"] = elbo["nats"], elbo["diffusion_se"]
    letters = method.sample(net, cfg.samples, cfg.length, steps=cfg.sample_steps, generator=ctx.generator,
                            device=ctx.device)  # fmt: skip
    out["kl"] = empirical_kl(letters.cpu(), probs)
    return out


def _run(ctx: BenchContext) -> BenchResult:
    cfg: SimplexBench = ctx.config
    rows: dict[str, dict[str, float]] = {}
    for letters in cfg.letters:
        probs = categorical_target(letters, seed=ctx.seed)
        held_out = sample_categorical(probs, cfg.elbo_sequences, cfg.length, generator=ctx.generator).to(ctx.device)
        # the floors: the ELBO's, these sequences' exact negative log-likelihood per position; the KL's, that of
        # `samples` exact draws (its finite-sample bias, about (K - 1) / (2 samples) for a spread-out target), drawn
        # on a generator of their own so the methods' draws stay as they were
        exact = float(-probs.log()[held_out.cpu()].mean())
        floor_gen = torch.Generator().manual_seed(10_000 + ctx.seed)
        draws = sample_categorical(probs, cfg.samples, cfg.length, generator=floor_gen)
        floors = {f"nats_K{letters}": exact, f"kl_K{letters}": empirical_kl(draws, probs)}
        rows.setdefault("exact target (held-out NLL; KL of exact draws)", {}).update(floors)
        for name, kind in METHODS.items():
            run = DNARun(task="toy-simplex", domain=kind, letters=letters, length=cfg.length, steps=cfg.steps,
                         batch=cfg.batch, lr=cfg.lr, width=cfg.width, seed=ctx.seed)  # fmt: skip
            data = lambda step, gen, run=run: training_batch(run, cfg.batch, gen, ctx.device)  # noqa: E731
            net = network(run)
            nan_rate, seconds = train_method(ctx, net, training_loss(run), data, steps=cfg.steps, lr=cfg.lr)
            for sample_domain in DOMAINS if kind == "unified" else (None,):
                scores = _score(ctx, method_of(run, sample_domain), net, probs, held_out)
                row = rows.setdefault(name if sample_domain is None else f"{name}, {sample_domain}", {})
                row.update({f"{k}_K{letters}": v for k, v in scores.items()})
                row[f"nan_rate_K{letters}"], row[f"train_s_K{letters}"] = nan_rate, seconds
    ours = rows.pop(OURS)
    return BenchResult(metrics=ours, baselines=rows, references=REFERENCES)


REFERENCES = {
    "Wright-Fisher, DNA (length 500) [paper]": {"nats_dna": 1.30},
    "uniform discrete, DNA [paper]": {"nats_dna": 1.39},
    "DDSM, DNA [paper]": {"nats_dna": 8.0},
}


def _claim(letters: int) -> Claim:
    """The paper's claim on the toy: Wright-Fisher's likelihood is close to discrete diffusion's (issue: within 10 %
    of masked diffusion's ELBO) while training without NaNs."""
    return Claim(
        f"Wright-Fisher's ELBO per position within 10% of masked diffusion's at K = {letters} (and no NaNs in "
        "training)",
        f"nats_K{letters}",
        "<=",
        1.10,
        baseline=MDLM,
    )


SCENARIO = Scenario(
    name="bio.wright_fisher.simplex",
    package="biology-dynamics",
    method="wright_fisher",
    run=_run,
    variants={"smoke": SMOKE, "quick": QUICK, "full": FULL},
    expected_seconds={"smoke": 15, "quick": 65, "full": 4800},  # quick: 56-96 s measured (2026-12-06)
    directions={f"{m}_K{k}": "min" for m in ("nats", "kl", "nan_rate") for k in (4, 20)},
    tags=frozenset({"simplex", "discrete", "likelihood"}),
    headline=True,
    claim=_claim(20),
    description="Toy categoricals over K letters: ELBO, sample KL and NaN rate for every simplex and discrete method.",
)

SCENARIO_100 = Scenario(
    name="bio.wright_fisher.simplex100",
    package="biology-dynamics",
    method="wright_fisher",
    run=_run,
    variants={
        "smoke": replace(SMOKE, letters=(100,)),
        "quick": replace(QUICK, letters=(100,), samples=1500),  # 2000 samples took 191 s of the 180 s budget
        "full": replace(FULL, letters=(100,)),
    },
    expected_seconds={"smoke": 15, "quick": 165, "full": 2400},  # quick: 151-173 s measured (2026-12-06)
    directions={f"{m}_K100": "min" for m in ("nats", "kl", "nan_rate")},
    tags=frozenset({"simplex", "discrete", "likelihood"}),
    claim=_claim(100),
    description="The toy comparison at K = 100 letters, where a simplex diffusion's small times are hardest.",
)
