"""`vision.flashworld.toy` (the headline): FlashWorld's cross-mode distilled 4-step student against the pre-trained
dual-mode model's MV mode and 3D mode (at the student's NFE and at many steps), MV-Dist (the MV mode distilled to the
same NFE, no 3D mode), the -CMC ablation and the generate-then-reconstruct pipeline (MV mode at many steps, then
Gaussians fitted to its views), on held-out scenes of 3D Gaussians conditioned on one view; 3 seeds (distillation
and sampling noise), mean and std, per-seed values in `flashworld_runs.json`, orbit renders in a PNG strip. The
pre-trained model and the scenes are artifacts (`vision.flashworld_dual_mode`, `vision.gaussian_scenes`)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace

import torch

from flowlab.core.bench import BenchContext, BenchResult, Claim, Curve, Scenario, parallel_map
from flowlab.core.config import Config
from flowlab.vision_gen.flashworld.distill import DistillConfig, distill_cross_mode
from flowlab.vision_gen.flashworld.evaluate import EvalSettings, scene_metrics
from flowlab.vision_gen.flashworld.model import DualModeConfig, DualModeModel
from flowlab.vision_gen.flashworld.sample import sample_3d, sample_mv
from flowlab.vision_gen.flashworld.scenes import RigConfig, SceneConfig, novel_cameras, orbit_ring, scene_data
from flowlab.vision_gen.flashworld.scenes import scenes_artifact as _scenes_artifact
from flowlab.vision_gen.flashworld.train import PretrainConfig, pretrained_artifact, pretrained_model
from flowlab.vision_gen.kit.gaussian_fit import fit_gaussians, render_views
from flowlab.vision_gen.kit.quality import strip_figure

__all__ = ["TOY", "FlashWorldBench"]

#: one job per (seed, task): the pre-trained modes; FlashWorld with the pipeline it is timed against; the others
TASKS = ("modes", "flashworld", "no_cmc", "mv_dist")


@dataclass(frozen=True)
class FlashWorldBench(Config):
    """The pre-trained model `pretrain`; the student `distill` (no_cmc: cmc_weight 0; mv_dist: mode mv) at
    `distill.nfe`; baselines also at `many_steps`; `n_eval` test scenes; the consistency fit `fit_gaussians`
    Gaussians x `fit_steps` steps, the pipeline's reconstruction `recon_steps` steps; `seeds` seeds in up to
    `workers` processes."""

    pretrain: PretrainConfig = field(default_factory=PretrainConfig)
    distill: DistillConfig = field(default_factory=DistillConfig)
    many_steps: int = 16
    n_eval: int = 32
    fit_gaussians: int = 6
    fit_steps: int = 150
    recon_steps: int = 300
    seeds: int = 3
    workers: int = 2

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 2 <= self.n_eval <= self.pretrain.scenes.n_test:
            raise ValueError(f"n_eval: expected 2..n_test ({self.pretrain.scenes.n_test}), got {self.n_eval}")
        if min(self.many_steps, self.fit_steps, self.recon_steps, self.seeds, self.workers) < 1:
            raise ValueError("many_steps, fit_steps, recon_steps, seeds, workers: expected >= 1")


def _timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def _sample(model: DualModeModel, mode: str, image, noise, steps: int, shift: float, seed: int):
    g = torch.Generator(noise.device).manual_seed(seed)
    with torch.inference_mode():
        if mode == "3d":
            return sample_3d(model, image, noise, steps=steps, shift=shift, generator=g)
        return sample_mv(model, image, noise, steps=steps, shift=shift)


def _job(cfg: FlashWorldBench, seed: int, task: str, device: torch.device, draw: bool) -> dict:
    """The rows of one (seed, task), and with `draw` the orbit renders of its 3D outputs."""
    torch.set_num_threads(1)
    teacher = pretrained_model(_pretrain(cfg, device), device=device)
    scenes, nfe, shift = cfg.pretrain.scenes, cfg.distill.nfe, cfg.distill.shift
    test = scene_data(scenes, "test").views.to(device)
    truth, real = test[: cfg.n_eval], test
    rig, novel = teacher.cameras, novel_cameras(scenes.rig, device=device)
    image = 2 * truth[:, 0] - 1
    noise = torch.randn((cfg.n_eval, scenes.rig.views, 3, scenes.rig.size, scenes.rig.size),
                        generator=torch.Generator().manual_seed(seed)).to(device)  # fmt: skip
    settings = EvalSettings(cfg.fit_gaussians, cfg.fit_steps)
    fit_gen = lambda: torch.Generator(device).manual_seed(seed + 1)  # noqa: E731

    def row(model, mode, steps, extra=None):
        out, seconds = _timed(lambda: _sample(model, mode, image, noise, steps, shift, seed))
        metrics = scene_metrics(out.views, out.gaussians, truth, real, rig, novel, settings, generator=fit_gen())
        return out, metrics | {"nfe": steps, "seconds": seconds / cfg.n_eval} | (extra or {})

    rows, samples = {}, {}
    if task == "modes":
        for mode in ("mv", "3d"):
            for steps in (nfe, cfg.many_steps):
                samples[f"{mode}_{steps}"], rows[f"{mode}_{steps}"] = row(teacher, mode, steps)
        return {"seed": seed, "rows": rows, "orbit": _orbits(samples, truth, cfg) if draw else {}}
    distill = {"flashworld": cfg.distill, "no_cmc": replace(cfg.distill, cmc_weight=0.0),
               "mv_dist": replace(cfg.distill, mode="mv")}[task]  # fmt: skip
    images = 2 * scene_data(scenes, "train").views[:, 0] - 1
    student, train_seconds = _timed(lambda: distill_cross_mode(teacher, images, replace(distill, seed=seed),
                                                               device=device))  # fmt: skip
    samples[task], rows[task] = row(student, distill.mode, nfe, {"train_seconds": train_seconds})
    if task == "flashworld":  # the generate-then-reconstruct pipeline, timed in the same process
        pipeline, seconds = _timed(lambda: _reconstructed(teacher, image, noise, cfg, seed))
        views = 2 * pipeline.renders - 1
        metrics = scene_metrics(views, pipeline.gaussians, truth, real, rig, novel, settings, generator=fit_gen())
        rows["mv_recon"] = metrics | {"nfe": cfg.many_steps, "seconds": seconds / cfg.n_eval}
        samples["mv_recon"] = pipeline
    return {"seed": seed, "rows": rows, "orbit": _orbits(samples, truth, cfg) if draw else {}}


def _reconstructed(teacher: DualModeModel, image, noise, cfg: FlashWorldBench, seed: int):
    views = _sample(teacher, "mv", image, noise, cfg.many_steps, cfg.distill.shift, seed).views
    return fit_gaussians(((views + 1) / 2).clamp(0, 1), teacher.cameras, n_gaussians=cfg.fit_gaussians,
                         steps=cfg.recon_steps, generator=torch.Generator(views.device).manual_seed(seed))  # fmt: skip


def _orbits(samples: dict, truth, cfg: FlashWorldBench) -> dict:
    """Orbit renders (8 cameras) of the first two scenes of each 3D output: name -> (2, 8, 3, S, S)."""
    ring = orbit_ring(cfg.pretrain.scenes.rig, 8, device=truth.device)
    with torch.no_grad():
        return {name: render_views(sample.gaussians.take(slice(0, 2)), ring, size=truth.shape[-1]).cpu()
                for name, sample in samples.items() if sample.gaussians is not None}  # fmt: skip


def _truth_orbit(cfg: FlashWorldBench) -> torch.Tensor:
    """Orbit renders (2, 8, 3, S, S) of the first two test scenes."""
    first = scene_data(cfg.pretrain.scenes, "test").scenes.take(slice(0, 2))
    return render_views(first, orbit_ring(cfg.pretrain.scenes.rig, 8), size=cfg.pretrain.scenes.rig.size)


def _summary(per_seed: list[dict[str, float]]) -> dict[str, float]:
    keys = per_seed[0].keys()
    out = {}
    for key in keys:
        values = torch.tensor([row[key] for row in per_seed], dtype=torch.float64)
        out[key] = float(values.mean())
        out[f"{key}_std"] = float(values.std()) if len(values) > 1 else 0.0
    return out


def run_toy(ctx: BenchContext) -> BenchResult:
    """Every (seed, task) job, then mean and std per row, the ratios of the acceptance items, the orbit strip and
    the consistency-against-NFE curve."""
    cfg: FlashWorldBench = ctx.config
    jobs = [(ctx.seed + s, task) for s in range(cfg.seeds) for task in TASKS]
    outs = parallel_map(_job, [cfg] * len(jobs), [s for s, _ in jobs], [t for _, t in jobs],
                        [ctx.device] * len(jobs), [s == ctx.seed for s, _ in jobs], workers=cfg.workers)  # fmt: skip
    per_row: dict[str, list[dict[str, float]]] = {}
    per_seed: dict[int, dict[str, dict[str, float]]] = {}
    orbits: dict[str, torch.Tensor] = {}
    for out in outs:
        for name, metrics in out["rows"].items():
            per_row.setdefault(name, []).append(metrics)
            per_seed.setdefault(out["seed"], {})[name] = metrics
        orbits |= out["orbit"]
    (ctx.out_dir / "flashworld_runs.json").write_text(json.dumps(per_seed, indent=1, default=float))
    rows = {name: _summary(values) for name, values in per_row.items()}
    nfe, many = cfg.distill.nfe, cfg.many_steps
    ours = rows.pop("flashworld")
    ours |= {"consistency_vs_mv": ours["consistency"] / rows[f"mv_{nfe}"]["consistency"],
             "sharpness_vs_3d": ours["sharpness"] / rows[f"3d_{nfe}"]["sharpness"],
             "speed_ratio": rows["mv_recon"]["seconds"] / ours["seconds"]}  # fmt: skip
    strip = ctx.out_dir / "flashworld_orbits.png"
    truth = _truth_orbit(cfg)
    named = {"truth": truth, "FlashWorld": orbits.get("flashworld"), "-CMC": orbits.get("no_cmc"),
             f"3D mode {nfe}": orbits.get(f"3d_{nfe}"), f"MV {many} + fit": orbits.get("mv_recon")}  # fmt: skip
    strip_figure(strip, {f"scene {j}: {name}": 2 * views[j] - 1 for j in range(2) for name, views in named.items()
                         if views is not None}, ncol=8)  # fmt: skip
    curve = Curve("consistency residual against NFE", "NFE", "residual",
                  {"MV mode": ([nfe, many], [rows[f"mv_{k}"]["consistency"] for k in (nfe, many)]),
                   "3D mode": ([nfe, many], [rows[f"3d_{k}"]["consistency"] for k in (nfe, many)]),
                   "FlashWorld": ([nfe], [ours["consistency"]])})  # fmt: skip
    return BenchResult(
        metrics=ours,
        baselines=rows,
        references={
            "FlashWorld, seconds per scene [paper]": {"seconds": 9.0},
            "Prometheus, seconds per scene [paper]": {"seconds": 435.0},
        },
        plots=(strip,),
        curves=(curve,),
        nfe={"flashworld": nfe, **{name: int(r["nfe"]) for name, r in rows.items()}},
    )


def _pretrain(cfg: FlashWorldBench, device: torch.device) -> PretrainConfig:
    """The pre-trained model's config as built on `device`'s type (the weights depend on it)."""
    return replace(cfg.pretrain, device=device.type)


def _artifacts(cfg: FlashWorldBench, device: torch.device):
    return (_scenes_artifact(cfg.pretrain.scenes), pretrained_artifact(_pretrain(cfg, device)))


_FULL_RIG = RigConfig(size=16)
_FULL = FlashWorldBench(
    pretrain=PretrainConfig(model=DualModeConfig(rig=_FULL_RIG, patch=4, dim=192, depth=6, heads=6),
                            scenes=SceneConfig(rig=_FULL_RIG, n_gaussians=6, n_train=20_000), steps=20_000,
                            batch_size=64),
    distill=DistillConfig(steps=3000, batch_size=32, lr=1e-4, fake_lr=4e-4),
    n_eval=256, fit_steps=300, recon_steps=500, workers=1,
)  # fmt: skip
_QUICK = FlashWorldBench(pretrain=PretrainConfig(steps=1000), distill=DistillConfig(), n_eval=32)
_SMOKE_RIG = RigConfig(size=4, novel=2)
_SMOKE = replace(
    _QUICK,
    pretrain=PretrainConfig(model=DualModeConfig(rig=_SMOKE_RIG, dim=16, depth=1, heads=2, features=4),
                            scenes=SceneConfig(rig=_SMOKE_RIG, n_train=32, n_val=4, n_test=8), steps=3, batch_size=4),
    distill=DistillConfig(nfe=2, steps=2, batch_size=4), many_steps=3, n_eval=4, fit_gaussians=2, fit_steps=3,
    recon_steps=3, seeds=1, workers=1,
)  # fmt: skip

TOY = Scenario(
    name="vision.flashworld.toy",
    package="vision",
    method="flashworld",
    run=run_toy,
    variants={"smoke": _SMOKE, "quick": _QUICK, "full": _FULL},
    directions={
        "consistency": "min",
        "consistency_rel": "min",
        "sharpness": "max",
        "fd": "min",
        "psnr_novel": "max",
        "psnr_view0": "max",
        "seconds": "min",
        "consistency_vs_mv": "min",
        "sharpness_vs_3d": "max",
        "speed_ratio": "max",
    },
    description="scenes of 3 coloured 3D Gaussians, 4 views at 8x8 conditioned on view 0: the cross-mode distilled "
    "4-step 3D student vs the dual-mode model's MV and 3D modes, MV-Dist, -CMC and MV + Gaussian fit; consistency "
    "residual, sharpness, FD, novel-view PSNR, NFE, seconds; 3 seeds.",
    # quick: 97.3 s measured on the idle 2-core CPU with its artifacts cached; full: an estimate for one H100, not run
    expected_seconds={"smoke": 10, "quick": 115, "full": 7200},
    headline=True,
    claim=Claim(
        "at 4 NFE the distilled student's consistency residual is below the MV mode's",
        "consistency",
        "<",
        1.0,
        baseline="mv_4",
    ),
    requires=_artifacts,
)
SCENARIOS = (TOY,)
