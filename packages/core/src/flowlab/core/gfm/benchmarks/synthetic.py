"""`core.gfm.torus`, `core.gfm.torus7` and `core.gfm.hyperbolic`: GFM vs RFM on generated wrapped-normal mixtures
(T^d and the Poincaré disk), scored also by KL to the exact density."""

from __future__ import annotations

from dataclasses import dataclass, replace

from flowlab.core.bench import (
    BenchContext,
    BenchResult,
    Claim,
    Scenario,
    torch_threads,
)
from flowlab.core.gfm.benchmarks.protocol import (
    FULL_TRAIN,
    LABELS,
    QUICK_FIELDS,
    QUICK_TRAIN,
    SMOKE_FIELDS,
    SMOKE_TRAIN,
    GFMBench,
    assemble,
    directions,
    evaluate_case,
)
from flowlab.core.gfm.data import poincare_mixture, random_torus_mixture
from flowlab.core.manifolds import FlatTorus, PoincareBall


@dataclass(frozen=True)
class TorusBench(GFMBench):
    """Wrapped-normal mixtures of `components` modes (scale `scale`) on the tori T^d, d in `dims`."""

    dims: tuple[int, ...] = (2, 7)
    components: int = 4
    scale: float = 0.3
    n_train: int = 20_000
    n_test: int = 5000


@dataclass(frozen=True)
class HyperbolicBench(GFMBench):
    """The 6-component wrapped-normal mixture on the Poincaré disk."""

    n_train: int = 20_000
    n_test: int = 5000


def run_torus(ctx: BenchContext) -> BenchResult:
    """A random wrapped-normal mixture on each torus T^d, d in cfg.dims: RFM and the GFM objectives trained and
    scored on it (case 'T<d>'), the first objective reported as ours."""
    cfg: TorusBench = ctx.config
    cases = {}
    with torch_threads(1):
        for d in cfg.dims:
            mix = random_torus_mixture(d, components=cfg.components, scale=cfg.scale, generator=ctx.generator)
            train = mix.sample(cfg.n_train, generator=ctx.generator).float().to(ctx.device)
            test = mix.sample(cfg.n_test, generator=ctx.generator).float().to(ctx.device)
            cases[f"T{d}"] = evaluate_case(ctx, FlatTorus(d), train, test, cfg, density=mix)
    return assemble(cases, LABELS[cfg.objectives[0]], "torus")


def run_hyperbolic(ctx: BenchContext) -> BenchResult:
    """The 6-component wrapped-normal mixture on the Poincaré disk: RFM and the GFM objectives trained and scored on
    it (case 'disk'), the first objective reported as ours."""
    cfg: HyperbolicBench = ctx.config
    mix = poincare_mixture(components=6, radius=1.5, scale=0.3)
    with torch_threads(1):
        train = mix.sample(cfg.n_train, generator=ctx.generator).float().to(ctx.device)
        test = mix.sample(cfg.n_test, generator=ctx.generator).float().to(ctx.device)
        cases = {"disk": evaluate_case(ctx, PoincareBall(2), train, test, cfg, density=mix)}
    return assemble(cases, LABELS[cfg.objectives[0]], "Poincare disk")


TORUS_FULL = TorusBench(train=FULL_TRAIN)
TORUS_QUICK = replace(TORUS_FULL, **QUICK_FIELDS, dims=(2,), warm_start=2000, n_test=1000)
HYPERBOLIC_FULL = HyperbolicBench(train=FULL_TRAIN)
HYPERBOLIC_QUICK = replace(HYPERBOLIC_FULL, **QUICK_FIELDS, warm_start=2500, n_test=1000)
TORUS_SMOKE = replace(TORUS_QUICK, **SMOKE_FIELDS, n_train=512, n_test=128)
HYPERBOLIC_SMOKE = replace(HYPERBOLIC_QUICK, **SMOKE_FIELDS, n_train=512, n_test=128)

TORUS = Scenario(
    name="core.gfm.torus",
    package="core",
    method="gfm",
    run=run_torus,
    variants={"smoke": TORUS_SMOKE, "quick": TORUS_QUICK, "full": TORUS_FULL},
    directions=directions(("T2", "T7")),
    tags=frozenset({"manifold", "flow-map", "few-step"}),
    single_thread=True,
    description="GFM vs RFM on wrapped-normal mixtures on T² (and T⁷ in full): MMD by NFE, KL to the exact density.",
    # quick: 62-99 s in three default runs of 2026-12-06 (75-78 s in RESULTS.md); full: a guess, 5 models x 100k
    # steps per torus at a few ms a step on one GPU
    expected_seconds={"smoke": 5, "quick": 65, "full": 5000},
    # the headline: the cheapest GFM case, on a torus like the paper's 1-NFE table (backbone torsions, T²)
    headline=True,
    claim=Claim("G-LSD's 1-NFE MMD at most 1/5 of RFM's (T²)", "T2/mmd_nfe1", "<=", 0.2, baseline="RFM"),
)

#: T⁷ at a CPU budget (issue 39): G-LSD with the forward-difference time derivative (`lsd_derivative="fd_forward"`:
#: two maps a row, 2.0-2.3x an RFM step against the central difference's 2.7x), an `AnchoredFlowMap` on the trained
#: RFM model's field (`distill="anchored"`: diagonal, 100-NFE sampler and likelihood are RFM's) whose correction
#: starts from RFM's step-TORUS7_WARM features with a zero head, half of its pairs starting at the source
#: (`source_fraction=0.5`), the quick network trained TORUS7_STEPS steps in all; 2000 samples and test points.
#: 1-NFE ratios 0.151 / 0.146 / 0.167 on seeds 0-2 (central difference 0.150 / 0.147 / 0.166; teacher-distilled
#: 0.147 / 0.175 / 0.181 with KL 1.55-1.8x RFM's, self-distilled 0.178 / 0.204 / 0.227; RESULTS.md)
TORUS7_STEPS, TORUS7_WARM = 60_000, 20_000
TORUS7_RECIPE = {"lsd_derivative": "fd_forward", "distill": "anchored", "source_fraction": 0.5}
TORUS7_FULL = TorusBench(train=replace(FULL_TRAIN, lsd_derivative="fd"), dims=(7,), objectives=("lsd",))
TORUS7_QUICK = replace(
    TORUS7_FULL,
    **{
        **QUICK_FIELDS,
        "objectives": ("lsd",),
        "train": replace(QUICK_TRAIN, steps=TORUS7_STEPS, **TORUS7_RECIPE),
        "samples": 2000,
    },
    dims=(7,),
    warm_start=TORUS7_WARM,
    n_test=2000,
)
TORUS7_SMOKE = replace(
    TORUS7_QUICK,
    **{**SMOKE_FIELDS, "train": replace(SMOKE_TRAIN, **TORUS7_RECIPE)},
    n_train=512,
    n_test=128,
)

TORUS7 = Scenario(
    name="core.gfm.torus7",
    package="core",
    method="gfm",
    run=run_torus,
    variants={"smoke": TORUS7_SMOKE, "quick": TORUS7_QUICK, "full": TORUS7_FULL},
    directions=directions(("T7",)),
    tags=frozenset({"manifold", "flow-map", "few-step"}),
    single_thread=True,
    description="G-LSD (forward-difference time derivative) vs RFM on a 4-mode wrapped-normal mixture on T⁷ within "
    "10 CPU minutes a seed: MMD by NFE, KL, each objective's step cost against RFM's.",
    # quick: 509-557 s a seed in two runs, two seeds side by side on the 2-core machine (RESULTS.md); full: the
    # torus full's T⁷ share
    expected_seconds={"smoke": 5, "quick": 540, "full": 5000},
    claim=Claim("G-LSD's 1-NFE MMD at most 1/5 of RFM's (T⁷)", "T7/mmd_nfe1", "<=", 0.2, baseline="RFM"),
)

HYPERBOLIC = Scenario(
    name="core.gfm.hyperbolic",
    package="core",
    method="gfm",
    run=run_hyperbolic,
    variants={"smoke": HYPERBOLIC_SMOKE, "quick": HYPERBOLIC_QUICK, "full": HYPERBOLIC_FULL},
    directions=directions(("disk",)),
    tags=frozenset({"manifold", "flow-map", "few-step"}),
    single_thread=True,
    description="GFM vs RFM on a 6-component wrapped-normal mixture on the Poincaré disk: MMD by NFE, KL.",
    # quick: 117-121 s idle (RESULTS.md); full: a guess, 5 models x 100k steps at a few ms a step on one GPU
    expected_seconds={"smoke": 5, "quick": 125, "full": 2500},
)
