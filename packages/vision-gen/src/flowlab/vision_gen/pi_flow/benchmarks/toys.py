"""`vision.pi_flow.toys`: pi-Flow GM and DX students and the x0-regression and DMD-lite baselines distilled from the
exact velocity of each 2-D toy, sampled at 1, 2 and 4 NFE: share of samples on a mode, mode coverage, sliced W;
the exact teacher at 4, 8 and 50 Euler steps beside them."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from flowlab.core.bench import BenchContext, BenchResult, Scenario, figure, parallel_map
from flowlab.core.config import Config
from flowlab.core.grids import uniform
from flowlab.core.nets import TimeMLP
from flowlab.core.nets.seeding import seeded_init
from flowlab.core.solvers import solve_ode
from flowlab.vision_gen.pi_flow.evaluate import toy_measures
from flowlab.vision_gen.pi_flow.model import PiFlowConfig, toy_student
from flowlab.vision_gen.pi_flow.sample import sample_piflow
from flowlab.vision_gen.pi_flow.toys import TOY_NAMES, toy_teacher
from flowlab.vision_gen.pi_flow.train import distill, resampling_batches

__all__ = ["TOYS", "ToysBench"]

_METHODS = ("piflow_gm", "piflow_dx", "x0_regression", "dmd_lite")


@dataclass(frozen=True)
class ToysBench(Config):
    """Every method of `methods` distilled with `student` (its method field replaced) on each toy of `toys`, MLP
    students of width `hidden`; `n_eval` samples per NFE of `nfes`, the teacher at `teacher_steps` Euler steps;
    the (toy, method) jobs in up to `workers` processes."""

    toys: tuple[str, ...]
    methods: tuple[str, ...]
    student: PiFlowConfig
    hidden: tuple[int, ...]
    nfes: tuple[int, ...]
    teacher_steps: tuple[int, ...]
    n_eval: int
    workers: int


def _job(cfg: ToysBench, seed: int, name: str, method: str, device: torch.device) -> dict[int, torch.Tensor]:
    """Distil one method on one toy and sample it at each NFE: {nfe: (n_eval, 2)}. Seeded from the seed, the toy
    and the method alone, so it gives the same numbers in any process."""
    torch.set_num_threads(1)
    index = TOY_NAMES.index(name) * 10 + _METHODS.index(method)
    config = replace(cfg.student, method=method, seed=seed * 100 + index)
    teacher = toy_teacher(name)
    student = toy_student(config, hidden=cfg.hidden)
    fake = None
    if method == "dmd_lite":
        with seeded_init(config.seed + 1):
            fake = TimeMLP(2, hidden=cfg.hidden)
    data_gen = torch.Generator().manual_seed(config.seed + 2)
    batches = resampling_batches(teacher.sample(200_000, generator=data_gen).to(device), config.batch_size)
    student = distill(config, student, teacher.velocity, batches, fake=fake, device=device)
    noise = torch.randn(cfg.n_eval, 2, generator=torch.Generator().manual_seed(seed * 100 + 99)).to(device)
    return {n: sample_piflow(student, noise, nfe=n, substeps_per_unit=config.substeps_per_unit).cpu()
            for n in cfg.nfes}  # fmt: skip


def _plot(ctx: BenchContext, samples: dict[str, dict[str, torch.Tensor]], nfe: int):
    rows = list(samples[next(iter(samples))])
    path = ctx.out_dir / "pi_flow_toys.png"
    with figure(path, ncols=len(rows), nrows=len(samples), size=(2.6 * len(rows), 2.8 * len(samples)),
                squeeze=False) as (_, ax):  # fmt: skip
        for i, (name, by_row) in enumerate(samples.items()):
            for j, row in enumerate(rows):
                x = by_row[row][:2000]
                ax[i, j].scatter(x[:, 0], x[:, 1], s=1, alpha=0.4)
                ax[i, j].set(xlim=(-3, 3), ylim=(-3, 3), title=f"{name}: {row}", xticks=[], yticks=[])
    return path


def run_toys(ctx: BenchContext) -> BenchResult:
    cfg: ToysBench = ctx.config
    jobs = [(name, method) for name in cfg.toys for method in cfg.methods]
    n = len(jobs)
    outs = parallel_map(_job, [cfg] * n, [ctx.seed] * n, *zip(*jobs, strict=True), [ctx.device] * n,
                        workers=cfg.workers)  # fmt: skip
    gen = torch.Generator().manual_seed(ctx.seed * 1000 + 7)
    ours: dict[str, float] = {}
    table: dict[str, dict[str, float]] = {}
    plotted: dict[str, dict[str, torch.Tensor]] = {name: {} for name in cfg.toys}
    show = 2 if 2 in cfg.nfes else cfg.nfes[0]
    for (name, method), out in zip(jobs, outs, strict=True):
        teacher = toy_teacher(name)
        dest = ours if method == "piflow_gm" else table.setdefault(method, {})
        for nfe, x in out.items():
            for key, value in toy_measures(teacher, x, generator=gen).items():
                dest[f"{name}/{key}_nfe{nfe}"] = value
        plotted[name][f"{method}, NFE {show}"] = out[show]
    noise = torch.randn(cfg.n_eval, 2, generator=torch.Generator().manual_seed(ctx.seed * 100 + 99))
    for name in cfg.toys:
        teacher = toy_teacher(name)
        for steps in cfg.teacher_steps:
            x = solve_ode(teacher.velocity, noise, uniform(steps), method="euler")
            for key, value in toy_measures(teacher, x, generator=gen).items():
                table.setdefault(f"teacher_{steps}", {})[f"{name}/{key}_nfe{steps}"] = value
            plotted[name][f"teacher, {steps} steps"] = x
    ours["coverage_min"] = min(v for k, v in ours.items() if "/coverage_" in k)
    return BenchResult(metrics=ours, baselines=table, plots=[_plot(ctx, plotted, show)])


_FULL = ToysBench(
    toys=TOY_NAMES,
    methods=_METHODS,
    student=PiFlowConfig(steps=5000, batch_size=512, lr=1e-3, mix_iters=1000, substeps_per_unit=128),
    hidden=(256, 256, 256),
    nfes=(1, 2, 4),
    teacher_steps=(4, 8, 50),
    n_eval=20_000,
    workers=2,
)
_QUICK = replace(_FULL, student=replace(_FULL.student, steps=600, batch_size=256, mix_iters=200, substeps_per_unit=32),
                 n_eval=4000)  # fmt: skip
_SMOKE = replace(_QUICK, toys=("eight_gaussians",), student=replace(_QUICK.student, steps=3, batch_size=32),
                 hidden=(16,), n_eval=200, teacher_steps=(4,), workers=1)  # fmt: skip

_DIRECTIONS = {
    f"{toy}/{key}_nfe{n}": direction
    for toy in TOY_NAMES
    for n in (1, 2, 4, 8, 50)
    for key, direction in (("on_mode", "max"), ("coverage", "max"), ("sliced_w", "min"))
} | {"coverage_min": "max"}

TOYS = Scenario(
    name="vision.pi_flow.toys",
    package="vision",
    method="pi_flow",
    run=run_toys,
    variants={"smoke": _SMOKE, "quick": _QUICK, "full": _FULL},
    directions=_DIRECTIONS,
    description="2-D checkerboard and eight Gaussians from exact teachers: pi-Flow GM/DX against x0 regression and "
    "DMD-lite at 1/2/4 NFE (share on a mode, mode coverage, sliced W), the teacher at 4/8/50 Euler steps.",
    expected_seconds={"smoke": 3, "quick": 80, "full": 1800},  # quick: 75-79 s measured; full: a guess
)
