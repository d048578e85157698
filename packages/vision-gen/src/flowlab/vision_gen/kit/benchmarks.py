"""vision.kit.teachers: the shared class-conditional digits teachers (rectified flow, EDM) and the plain DDPM of the
same size, each sampled at 4/8/18/50 steps through the core's samplers, their digits-FD beside the real-vs-real
floor at the same n, and the digits classifier's accuracy on their labels. The rf and edm teachers are also
sampled with the other family's sampler (through the core's rectified-flow <-> EDM adapters).

vision.kit.autoencoder: the tiny autoencoders' reconstructions (digits test split, validation-photo crops), PSNR
and SSIM beside bilinear down-and-up sampling through the latent's resolution."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from flowlab.core.artifacts import Artifact
from flowlab.core.bench import INFRASTRUCTURE, BenchContext, BenchResult, Claim, Curve, Scenario
from flowlab.core.config import Config
from flowlab.vision_gen.kit.autoencoder import AutoencoderConfig, autoencoder_artifact, tiny_autoencoder
from flowlab.vision_gen.kit.data import load_digits_images
from flowlab.vision_gen.kit.metrics import FeatureNetConfig, feature_net_artifact
from flowlab.vision_gen.kit.photos import photo_crops
from flowlab.vision_gen.kit.quality import class_histogram, fd_floor, fd_with_floor, psnr_ssim, strip_figure
from flowlab.vision_gen.kit.teachers import TeacherConfig, digits_teacher, teacher_artifact

__all__ = ["AUTOENCODER", "TEACHERS"]

#: (family, sampler) pairs the scenario reports; the first sampler of a family is its own
_RUNS = (("rf", "euler"), ("rf", "edm"), ("edm", "edm"), ("edm", "euler"), ("ddpm", "dpmpp_2m"))
#: the report's row names: "ours" is the rf teacher on its own sampler, every other run a row beside it
_NAMES = {
    "rf/euler": "rf teacher, Euler in t",
    "edm/edm": "edm teacher, EDM Heun in sigma",
    "ddpm/dpmpp_2m": "DDPM (same ClassDiT), DPM-Solver++ 2M",
    "rf/edm": "rf teacher, EDM Heun in sigma (cross-family)",
    "edm/euler": "edm teacher, Euler in t (cross-family)",
}


@dataclass(frozen=True)
class TeachersBench(Config):
    """Teachers at `size` (ClassDiT width `dim`, `depth` blocks, `teacher_steps` training steps of batch
    `teacher_batch`, seed `teacher_seed` whatever the run's seed); `n` samples per (teacher, sampler, step count),
    labels 0-9 in turn, classifier-free guidance `guidance`; the floor over `floor_repeats` real draws."""

    size: int = 8
    dim: int = 64
    depth: int = 4
    teacher_steps: int = 4000
    teacher_batch: int = 128
    teacher_seed: int = 0
    steps: tuple[int, ...] = (4, 8, 18, 50)
    n: int = 1000
    guidance: float = 1.0
    floor_repeats: int = 5
    feature_epochs: int = 30


TEACHERS_QUICK = TeachersBench()
TEACHERS_FULL = replace(TEACHERS_QUICK, size=16, dim=128, depth=6, teacher_steps=40_000, teacher_batch=256)
TEACHERS_SMOKE = replace(TEACHERS_QUICK, dim=16, depth=1, teacher_steps=4, teacher_batch=16, steps=(2, 3), n=40,
                         floor_repeats=2, feature_epochs=1)  # fmt: skip


def _teacher(cfg: TeachersBench, family: str, device: torch.device) -> TeacherConfig:
    return TeacherConfig(family=family, size=cfg.size, dim=cfg.dim, depth=cfg.depth, steps=cfg.teacher_steps,
                         batch_size=cfg.teacher_batch, seed=cfg.teacher_seed, device=device.type)  # fmt: skip


def _artifacts(cfg: TeachersBench, device: torch.device) -> tuple[Artifact, ...]:
    teachers = tuple(teacher_artifact(_teacher(cfg, f, device)) for f in ("rf", "edm", "ddpm"))
    return (*teachers, feature_net_artifact(FeatureNetConfig(epochs=cfg.feature_epochs)))


def _run(ctx: BenchContext) -> BenchResult:
    cfg: TeachersBench = ctx.config
    features = FeatureNetConfig(epochs=cfg.feature_epochs)
    labels = torch.arange(cfg.n) % 10
    floor = fd_floor(cfg.n, size=cfg.size, repeats=cfg.floor_repeats, seed=ctx.seed, features=features)
    rows: dict[str, dict[str, float]] = {}
    best: dict[str, torch.Tensor] = {}
    lines: dict[str, tuple[list[float], list[float]]] = {}
    teachers = {f: digits_teacher(_teacher(cfg, f, ctx.device), device=ctx.device) for f in ("rf", "edm", "ddpm")}
    for family, sampler in _RUNS:
        teacher = teachers[family]
        row: dict[str, float] = {}
        samples, tvs = {}, {}
        for steps in cfg.steps:
            g = torch.Generator(ctx.device).manual_seed(ctx.seed)
            x = teacher.sample(labels, steps=steps, sampler=sampler, guidance=cfg.guidance, generator=g).clamp(-1, 1)
            fd = fd_with_floor(x, repeats=cfg.floor_repeats, seed=ctx.seed, features=features)
            hist = class_histogram(x, labels, features=features)
            row |= {f"fd_{steps}": fd.fd, f"acc_{steps}": hist.accuracy}
            samples[steps], tvs[steps] = x, hist.tv
        top = min(cfg.steps, key=lambda s: row[f"fd_{s}"])
        row |= {"best_steps": float(top), "fd_best": row[f"fd_{top}"], "acc_best": row[f"acc_{top}"],
                "class_tv_best": tvs[top]}  # fmt: skip
        key = f"{family}/{sampler}"
        label = _NAMES[key]
        rows[key], best[f"{label}, {top} steps"] = row, samples[top][:10]
        lines[label] = ([float(s) for s in cfg.steps], [row[f"fd_{s}"] for s in cfg.steps])
    lines["real-vs-real floor"] = ([float(s) for s in cfg.steps], [floor.floor] * len(cfg.steps))
    strip_figure(ctx.out_dir / "teachers.png", best)
    metrics = {**rows["rf/euler"], "floor": floor.floor, "floor_std": floor.floor_std, "n": float(cfg.n)}
    metrics["min_acc_best"] = min(rows[k]["acc_best"] for k in ("rf/euler", "edm/edm"))
    return BenchResult(
        metrics=metrics,
        baselines={name: rows[key] for key, name in _NAMES.items() if key != "rf/euler"},
        plots=(ctx.out_dir / "teachers.png",),
        curves=(Curve("digits-FD against sampler steps", "steps", "digits-FD", lines, logx=True, logy=True),),
    )


TEACHERS = Scenario(
    name="vision.kit.teachers",
    package="vision",
    method="kit",
    tags=frozenset({INFRASTRUCTURE}),  # the shared teachers, not a method: in quick, not in the default suite
    run=_run,
    variants={"smoke": TEACHERS_SMOKE, "quick": TEACHERS_QUICK, "full": TEACHERS_FULL},
    # quick: with the three teachers cached (each cold build is its artifact's own row); full: one GPU
    expected_seconds={"smoke": 5, "quick": 115, "full": 900},
    requires=_artifacts,
    claim=Claim(
        "both teachers' (rf, edm) class-conditional samples are classified as their label at their best step count",
        "min_acc_best",
        ">=",
        0.9,
    ),
    directions={"min_acc_best": "max", "fd_best": "min", "acc_best": "max", "class_tv_best": "min"},
    description="Class-conditional ClassDiT digits teachers: rectified flow (Euler in t) and EDM (Heun in sigma), "
    "plus the plain DDPM of the same net (DPM-Solver++ 2M) and each rf/edm teacher on the other family's sampler; "
    "digits-FD at 4/8/18/50 steps against the test split beside the real-vs-real floor at the same n, and the "
    "digits classifier's accuracy on the labels.",
)


@dataclass(frozen=True)
class AutoencoderBench(Config):
    """The digits autoencoder (`digits`, the kit's default config but for `steps`) and an RGB one on photo crops of
    `photo_size` (`photo_steps`); scored on the digits test split and `photo_n` crops of the validation photos."""

    steps: int = 600
    channels: tuple[int, ...] = (16, 32)
    photo_size: int = 16
    photo_steps: int = 3000
    photo_n: int = 512


AUTOENCODER_QUICK = AutoencoderBench()
AUTOENCODER_FULL = replace(AUTOENCODER_QUICK, steps=4000, channels=(32, 64, 64), photo_size=32, photo_steps=8000)
AUTOENCODER_SMOKE = replace(AUTOENCODER_QUICK, steps=4, channels=(4, 8), photo_steps=4, photo_n=16)


def _autoencoders(cfg: AutoencoderBench, device: torch.device) -> tuple[AutoencoderConfig, AutoencoderConfig]:
    digits = AutoencoderConfig(steps=cfg.steps, channels=cfg.channels, device=device.type)
    photos = replace(digits, dataset="photos", in_channels=3, size=cfg.photo_size, steps=cfg.photo_steps)
    return digits, photos


def _bilinear(x: torch.Tensor, factor: int) -> torch.Tensor:
    """Down to the latent's resolution and back up (bilinear, antialiased down): x: (N, C, H, W) -> same."""
    small = torch.nn.functional.interpolate(x, scale_factor=1 / factor, mode="bilinear", antialias=True)
    return torch.nn.functional.interpolate(small, size=x.shape[-2:], mode="bilinear").clamp(-1, 1)


def _reconstruct(ctx: BenchContext) -> BenchResult:
    cfg: AutoencoderBench = ctx.config
    metrics: dict[str, float] = {}
    baseline: dict[str, float] = {}
    sets = {
        "digits": load_digits_images(16, split="test").x,
        "photos": photo_crops("val", cfg.photo_size, cfg.photo_n, seed=ctx.seed).x,
    }
    for (name, images), config in zip(sets.items(), _autoencoders(cfg, ctx.device), strict=True):
        ae = tiny_autoencoder(config, device=ctx.device)
        with torch.no_grad():
            out = ae.decode(ae.encode(images.to(ctx.device)).latent_dist.mode()).sample.clamp(-1, 1).cpu()
        ours, theirs = psnr_ssim(out, images), psnr_ssim(_bilinear(images, config.downsample), images)
        metrics |= {f"{name}/psnr": ours.mean_psnr, f"{name}/ssim": ours.mean_ssim}
        baseline |= {f"{name}/psnr": theirs.mean_psnr, f"{name}/ssim": theirs.mean_ssim}
    return BenchResult(metrics=metrics, baselines={"bilinear down-up to the latent resolution": baseline})


AUTOENCODER = Scenario(
    name="vision.kit.autoencoder",
    package="vision",
    method="kit",
    tags=frozenset({INFRASTRUCTURE}),  # the shared autoencoders, not a method: in quick, not in the default suite
    run=_reconstruct,
    variants={"smoke": AUTOENCODER_SMOKE, "quick": AUTOENCODER_QUICK, "full": AUTOENCODER_FULL},
    expected_seconds={"smoke": 3, "quick": 20, "full": 60},
    requires=lambda cfg, device: tuple(autoencoder_artifact(c) for c in _autoencoders(cfg, device)),
    directions={"digits/psnr": "max", "digits/ssim": "max", "photos/psnr": "max", "photos/ssim": "max"},
    description="Tiny KL autoencoders (diffusers AutoencoderKL interface) on digits and on RGB photo crops: PSNR and "
    "SSIM (scikit-image) of reconstructions of the digits test split and of validation-photo crops, beside bilinear "
    "down-and-up sampling through the latent's resolution.",
)
