"""The default GenDR-Pix student, for `flowlab vision upscale` without `--model`: the quick recipe (the teacher on the
kit's photo autoencoder, stage I, stage II; the `vision.gendr_pix.photos` quick scenario's settings) trained once on
the bundled train photos into the artifact cache, as a model folder of `store`."""

from __future__ import annotations

from pathlib import Path

from flowlab.core.artifacts import Artifact, ensure
from flowlab.vision_gen.gendr_pix.data import sr_pairs
from flowlab.vision_gen.gendr_pix.model import GenDRConfig
from flowlab.vision_gen.gendr_pix.store import save_sr
from flowlab.vision_gen.gendr_pix.train import distill_stage1, distill_stage2, train_teacher
from flowlab.vision_gen.kit import autoencoder
from flowlab.vision_gen.kit.photos import photo_path, photo_split

__all__ = ["QUICK_RECIPE", "default_student", "student_artifact"]

#: batch 16; teacher 250, stage I 150, stage II 200 steps (RESULTS.md: 29.72 dB on held-out 64 px crops)
QUICK_RECIPE = GenDRConfig(batch_size=16, teacher_steps=250, stage1_steps=150, stage2_steps=200)
#: seconds per training step at batch 16 on 32 px crops, 2 cores: the first default-student build took 88 s for its
#: 600 steps with the autoencoder cached (CI running beside it)
_STEP_SECONDS = 0.15


def _build_student(config: GenDRConfig, folder: Path) -> None:
    pairs = sr_pairs("train", config.crop, config.pairs, config.degradation, seed=config.seed)
    teacher = train_teacher(autoencoder.tiny_autoencoder(config.autoencoder), pairs, config, progress=True)
    stage_one = distill_stage1(teacher, pairs, config, progress=True)
    save_sr(folder, {"stage2": distill_stage2(stage_one, teacher, pairs, config, progress=True)}, config)


def student_artifact(config: GenDRConfig = QUICK_RECIPE) -> Artifact:
    """The cache entry of the student trained by `config` (its autoencoder is an artifact of its own)."""
    if not isinstance(config, GenDRConfig):
        raise ValueError(f"config: expected a GenDRConfig, got {type(config).__name__}")
    steps = config.teacher_steps + config.stage1_steps + config.stage2_steps
    return Artifact(
        "vision.gendr_pix_student",
        build=_build_student,
        config=config,
        inputs=tuple(photo_path(n) for n in photo_split()["train"]),
        version=2,  # 2: the model folder's config.json carries the store's format tag
        expected_seconds=steps * _STEP_SECONDS * config.batch_size / 16 * (config.crop / 32) ** 2,
        description=f"GenDR-Pix x{config.scale} student, {steps} steps on the train photos",
    )


def default_student(config: GenDRConfig = QUICK_RECIPE) -> Path:
    """The folder of the student trained by `config` (a `load_sr` folder holding stage2), built on the first call."""
    return ensure(student_artifact(config)).path
