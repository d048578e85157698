"""The toy world: scenes of a few isotropic coloured 3D Gaussians near the origin on a black background, seen by a
fixed rig of V cameras on an orbit (the generated views) and by novel cameras between them (held out for novel-view
PSNR); train / val / test splits rendered once and kept as the `vision.gaussian_scenes` artifact.

    data = scene_data(SceneConfig(), "train")     # views (N, V + V_novel, 3, S, S) in [0, 1]
    rig, novel = rig_cameras(config.rig), novel_cameras(config.rig)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from flowlab.core.artifacts import Artifact, ensure
from flowlab.core.config import Config
from flowlab.vision_gen.kit.cameras import Cameras, orbit_cameras
from flowlab.vision_gen.kit.gaussian_fit import render_views
from flowlab.vision_gen.kit.splatting import Gaussians

__all__ = [
    "SPLITS",
    "RigConfig",
    "SceneConfig",
    "SceneData",
    "novel_cameras",
    "orbit_ring",
    "random_scenes",
    "rig_cameras",
    "scene_data",
    "scenes_artifact",
]

SPLITS = ("train", "val", "test")


@dataclass(frozen=True)
class RigConfig(Config):
    """`views` cameras at azimuths 360 k / views degrees (the generated views; view 0 is the conditioning one) and
    `novel` cameras half-way between them, on a circle of `radius` at `elevation` degrees, looking at the origin;
    images `size` x `size` with focal length `focal` x size pixels."""

    views: int = 4
    novel: int = 4
    size: int = 8
    radius: float = 2.5
    elevation: float = 20.0
    focal: float = 1.4

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.views < 2 or self.novel < 1 or self.size < 4:
            raise ValueError(f"views, novel, size: expected >= 2, >= 1 and >= 4, got {self.views}, {self.novel}, "
                             f"{self.size}")  # fmt: skip
        if not (self.radius > 1 and self.focal > 0):
            raise ValueError(f"radius, focal: expected > 1 and > 0, got {self.radius}, {self.focal}")


@dataclass(frozen=True)
class SceneConfig(Config):
    """Scenes of `n_gaussians` Gaussians with means uniform in [-extent, extent]^3, standard deviations uniform in
    `scale_range`, opacities in `opacity_range` and colours uniform in [0, 1]^3; `n_train`, `n_val`, `n_test`
    scenes per split, drawn from `seed` (a split's scenes depend on its own stream only)."""

    rig: RigConfig = field(default_factory=RigConfig)
    n_gaussians: int = 3
    extent: float = 0.4
    scale_range: tuple[float, float] = (0.12, 0.3)
    opacity_range: tuple[float, float] = (0.7, 1.0)
    n_train: int = 4096
    n_val: int = 256
    n_test: int = 256
    seed: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        if min(self.n_gaussians, self.n_train, self.n_val, self.n_test) < 1:
            raise ValueError("n_gaussians, n_train, n_val, n_test: expected positive counts")
        low, high = self.scale_range
        if not 0 < low <= high:
            raise ValueError(f"scale_range: expected 0 < low <= high, got {self.scale_range}")
        low, high = self.opacity_range
        if not 0 < low <= high <= 1:
            raise ValueError(f"opacity_range: expected 0 < low <= high <= 1, got {self.opacity_range}")


def _orbit(rig: RigConfig, azimuths: torch.Tensor, device: torch.device | str | None) -> Cameras:
    return orbit_cameras(azimuths, radius=rig.radius, elevation=rig.elevation, focal=rig.focal * rig.size,
                         size=rig.size, device=device)  # fmt: skip


def rig_cameras(rig: RigConfig, *, device: torch.device | str | None = None) -> Cameras:
    """The V generated views' cameras (V,)."""
    return _orbit(rig, torch.arange(rig.views) * 360.0 / rig.views, device)


def novel_cameras(rig: RigConfig, *, device: torch.device | str | None = None) -> Cameras:
    """The held-out cameras (V_novel,), half-way between rig cameras (evenly spread over the orbit)."""
    return _orbit(rig, (torch.arange(rig.novel) + 0.5) * 360.0 / rig.novel, device)


def orbit_ring(rig: RigConfig, n: int, *, device: torch.device | str | None = None) -> Cameras:
    """n cameras evenly spread around the whole orbit (for the PNG strips)."""
    return _orbit(rig, torch.arange(n) * 360.0 / n, device)


def random_scenes(config: SceneConfig, n: int, *, generator: torch.Generator) -> Gaussians:
    """n random scenes of `config.n_gaussians` isotropic Gaussians each (on the generator's device)."""
    m, dev = config.n_gaussians, generator.device

    def uniform(*shape: int, low: float, high: float) -> torch.Tensor:
        return low + (high - low) * torch.rand(*shape, generator=generator, device=dev)

    means = uniform(n, m, 3, low=-config.extent, high=config.extent)
    scales = uniform(n, m, 1, low=config.scale_range[0], high=config.scale_range[1]).expand(n, m, 3)
    opacities = uniform(n, m, low=config.opacity_range[0], high=config.opacity_range[1])
    return Gaussians(means, scales.contiguous(), opacities, uniform(n, m, 3, low=0.0, high=1.0))


@dataclass(frozen=True)
class SceneData:
    """One split: `views` (N, V + V_novel, 3, S, S) renders in [0, 1] (rig views first, then the novel ones) and the
    ground-truth `scenes` (N scenes)."""

    views: torch.Tensor
    scenes: Gaussians


def _build(config: SceneConfig, folder: Path) -> None:
    cams = rig_cameras(config.rig)
    novel = novel_cameras(config.rig)
    every = Cameras(*(torch.cat((a, b)) for a, b in zip((cams.K, cams.R, cams.t), (novel.K, novel.R, novel.t),
                                                        strict=True)))  # fmt: skip
    tensors = {}
    for k, split in enumerate(SPLITS):
        n = getattr(config, f"n_{split}")
        scenes = random_scenes(config, n, generator=torch.Generator().manual_seed(config.seed * 3 + k))
        with torch.no_grad():
            views = render_views(scenes, every, size=config.rig.size)
        tensors |= {f"{split}.views": views, f"{split}.means": scenes.means, f"{split}.scales": scenes.scales,
                    f"{split}.opacities": scenes.opacities, f"{split}.colors": scenes.colors}  # fmt: skip
    save_file({k: v.contiguous() for k, v in tensors.items()}, folder / "scenes.safetensors")


def scenes_artifact(config: SceneConfig) -> Artifact:
    """The cache entry of the rendered splits of `config`."""
    n = config.n_train + config.n_val + config.n_test
    return Artifact("vision.gaussian_scenes", build=_build, config=config,
                    expected_seconds=max(1.0, n * (config.rig.size / 8) ** 2 * 1e-3),
                    description=f"{n} scenes of {config.n_gaussians} 3D Gaussians, {config.rig.views} + "
                                f"{config.rig.novel} views at {config.rig.size}x{config.rig.size}")  # fmt: skip


def scene_data(config: SceneConfig, split: str) -> SceneData:
    """The rendered `split` of `config` (built into the artifact cache on the first call)."""
    if split not in SPLITS:
        raise ValueError(f"split: expected one of {SPLITS}, got {split!r}")
    state = load_file(ensure(scenes_artifact(config)).path / "scenes.safetensors")
    scenes = Gaussians(*(state[f"{split}.{a}"] for a in ("means", "scales", "opacities", "colors")))
    return SceneData(state[f"{split}.views"], scenes)
