"""The shared class-conditional digits teachers: one `ClassDiT` per family, trained once through the core `fit` with
an EMA and kept as a core artifact, so that no vision method trains its own copy.

    teacher = digits_teacher(TeacherConfig(family="rf", size=8))
    images = teacher.sample(labels, steps=8, generator=torch.Generator().manual_seed(0))

families:
- "rf": rectified flow; the net predicts the CondOT velocity x_1 - x_0 at t ~ U(0, 1).
- "edm": EDM (Karras et al. 2022); the net inside an `EDMPreconditioner`, `edm_loss` (ln sigma ~ N(-1.2, 1.2^2)).
- "ddpm": the plain epsilon DDPM (`ddpm_loss` on `DiscreteVP.linear()`), the same net: the baseline of the others.

Labels are dropped to the null label with probability `class_dropout`, for classifier-free guidance. The rf and
edm teachers share one velocity field over rectified-flow time (the EDM denoiser through the core's
`DenoiserAsVelocity`), so either runs on either family's sampler: "euler" / "heun" in t (`solve_ode`) or "edm" (the
EDM Heun sampler in sigma through `VelocityAsDenoiser`). Guidance acts on that velocity, which is the same as
guiding the denoiser (the two are affine in each other with the same coefficients). The ddpm teacher samples with
the kit's DDIM / DPM-Solver++ on the trailing grid.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from flowlab.core.artifacts import Artifact, ensure
from flowlab.core.config import Config
from flowlab.core.grids import trailing, uniform
from flowlab.core.losses import ddpm_loss, edm_loss, flow_matching_loss
from flowlab.core.nets import ClassifierFreeGuidance, DenoiserAsVelocity, EDMPreconditioner, VelocityAsDenoiser
from flowlab.core.nets.family import rf_time
from flowlab.core.nets.labels import check_labels
from flowlab.core.paths import AffinePath
from flowlab.core.schedules import EDM, CondOT, DiscreteVP
from flowlab.core.solvers import edm_sample, sample_diffusion, solve_ode
from flowlab.core.train import cpu_state_dict
from flowlab.vision_gen.kit.data import digits_source, load_digits_images
from flowlab.vision_gen.kit.nets import ClassDiT, DiTField
from flowlab.vision_gen.kit.train import fit_with_ema

__all__ = [
    "FAMILIES",
    "NULL_LABEL",
    "SAMPLERS",
    "DigitsTeacher",
    "TeacherConfig",
    "digits_teacher",
    "teacher_artifact",
    "teacher_loss",
    "train_teacher",
]

FAMILIES = ("rf", "edm", "ddpm")
#: the null label of classifier-free guidance (the digits have labels 0-9)
NULL_LABEL = 10
#: the samplers of each family (the first is the family's own)
SAMPLERS = {"rf": ("euler", "heun", "edm"), "edm": ("edm", "euler", "heun"), "ddpm": ("dpmpp_2m", "ddim")}
#: seconds per training step of the 8x8 ClassDiT (dim 64, depth 4, batch 128) on the 2-core CPU machine
#: (measured on a clean clone, cold: 4000 steps in 226-269 s)
_STEP_SECONDS = 0.065


@dataclass(frozen=True)
class TeacherConfig(Config):
    """A class-conditional digits teacher: a `ClassDiT` (patch `patch`, width `dim`, `depth` blocks) of `family`
    trained for `steps` Adam steps (one-cycle to `lr`) on the kit's digits train split at `size` in [-1, 1],
    EMA `ema_decay`; sampled with `sigma_max` as the EDM sampler's top noise level. `device` is a device type
    (the weights depend on it)."""

    family: str = "rf"
    size: int = 8
    patch: int = 2
    dim: int = 64
    depth: int = 4
    heads: int = 4
    steps: int = 4000
    batch_size: int = 128
    lr: float = 1e-3
    ema_decay: float = 0.999
    class_dropout: float = 0.1
    sigma_data: float = 0.5
    sigma_max: float = 80.0
    seed: int = 0
    device: str = "cpu"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.family not in FAMILIES:
            raise ValueError(f"family: expected one of {FAMILIES}, got {self.family!r}")
        if self.size not in (8, 16, 32):
            raise ValueError(f"size: expected 8, 16 or 32, got {self.size!r}")
        for name in ("patch", "dim", "depth", "heads", "steps", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: expected a positive integer, got {getattr(self, name)!r}")
        if self.dim % 4 or self.dim % self.heads:
            raise ValueError(f"dim: expected a multiple of 4 (the 2-D positions) and of heads = {self.heads}, got "
                             f"{self.dim!r}")  # fmt: skip
        if not 0 <= self.class_dropout < 1:
            raise ValueError(f"class_dropout: expected a probability in [0, 1), got {self.class_dropout!r}")
        if self.device not in ("cpu", "cuda", "mps"):
            raise ValueError(f"device: expected a device type (cpu, cuda or mps), got {self.device!r}")


class DigitsTeacher(nn.Module):
    """A trained (or fresh) teacher of `config`: `net` the ClassDiT; labels y: (B,) int64 in [0, 10)."""

    def __init__(self, config: TeacherConfig) -> None:
        super().__init__()
        self.config = config
        scale = 250.0 if config.family == "edm" else 1000.0
        self.net = ClassDiT(
            config.size, 1, patch=config.patch, dim=config.dim, depth=config.depth, heads=config.heads, time_scale=scale
        )
        self.schedule = DiscreteVP.linear()

    @property
    def family(self) -> str:
        """The teacher's family, from its config (e.g. "rf" or "edm")."""
        return self.config.family

    def denoiser(self) -> EDMPreconditioner:
        """The edm teacher's D(x=x_sigma, sigma=(B,), y=...) -> E[x_1 | x_sigma]."""
        self._need("denoiser", ("edm",))
        return EDMPreconditioner(self.net, sigma_data=self.config.sigma_data)

    def velocity(self, guidance: float = 1.0) -> nn.Module:
        """The rf/edm teacher's velocity field(x=x_t, t=(B,), y=...) over rectified-flow time, guided by
        u_null + guidance (u_y - u_null) unless guidance == 1."""
        self._need("velocity", ("rf", "edm"))
        field = self.net if self.family == "rf" else DenoiserAsVelocity(self.denoiser())
        return self._guided(field, guidance)

    def epsilon(self, guidance: float = 1.0) -> nn.Module:
        """The ddpm teacher as a kit denoiser (`DiTField`, epsilon on `schedule`), guided like `velocity`."""
        self._need("epsilon", ("ddpm",))
        return self._guided(DiTField(self.net, schedule=self.schedule), guidance)

    def sample(
        self,
        labels: torch.Tensor,
        *,
        steps: int,
        sampler: str | None = None,
        guidance: float = 1.0,
        generator: torch.Generator | None = None,
        noise: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Class-conditional samples (B, 1, size, size) in about [-1, 1] for labels (B,), from noise drawn with
        `generator` or given as `noise` (B, 1, size, size) (one of the two; noise is moved to the teacher's
        device), so several samplers or students can share it; `steps` sampler steps (the EDM sampler's Heun
        steps cost 2 steps - 1 evaluations); `sampler` one of SAMPLERS[family] (default the family's own)."""
        sampler = SAMPLERS[self.family][0] if sampler is None else sampler
        if sampler not in SAMPLERS[self.family]:
            raise ValueError(f"sampler: expected one of {SAMPLERS[self.family]} for a {self.family} teacher")
        if not (isinstance(steps, int) and steps >= 1):
            raise ValueError(f"steps: expected a positive int, got {steps!r}")
        device = next(self.parameters()).device
        if not isinstance(labels, torch.Tensor):
            raise ValueError(f"labels: expected a tensor of class labels (B,), got {type(labels).__name__}")
        labels = check_labels(labels, labels.shape[0], self.net.num_classes).to(device)
        size = self.config.size
        if (generator is None) == (noise is None):
            raise ValueError("generator, noise: give exactly one (noise is drawn with the generator, or given)")
        if noise is None:
            noise = torch.randn((labels.shape[0], 1, size, size), generator=generator, device=generator.device)
        elif not isinstance(noise, torch.Tensor) or tuple(noise.shape) != (labels.shape[0], 1, size, size):
            got = tuple(noise.shape) if isinstance(noise, torch.Tensor) else type(noise).__name__
            raise ValueError(f"noise: expected shape ({labels.shape[0]}, 1, {size}, {size}), got {got}")
        noise = noise.to(device)
        with torch.inference_mode():
            if self.family == "ddpm":
                grid = trailing(self.schedule, steps, device=device)
                field = self.epsilon(guidance)
                kw = {"schedule": self.schedule, "prediction": "epsilon", "method": sampler}
                return sample_diffusion(field, noise, grid, **kw, y=labels)
            field = self.velocity(guidance)
            sigma_max = self.config.sigma_max
            if sampler == "edm":
                if steps == 1:
                    raise ValueError("steps: the EDM sampler needs at least 2 steps")
                sigmas = EDM(sigma_max=sigma_max)(uniform(steps - 1, dtype=torch.float64)).sigma
                sigmas = torch.cat([sigmas, sigmas.new_zeros(1)]).to(device=device, dtype=noise.dtype)
                return edm_sample(VelocityAsDenoiser(field), noise, sigmas, y=labels)
            # In t: the rf teacher starts from pure noise at t = 0; the edm one from sigma_max (its t = 0 is inf).
            start = 0.0 if self.family == "rf" else float(rf_time(torch.tensor(sigma_max)))
            x = noise if self.family == "rf" else start * sigma_max * noise
            grid = uniform(steps, start=start, device=device, dtype=noise.dtype)
            return solve_ode(field, x, grid, method=sampler, y=labels)

    def _guided(self, field: nn.Module, guidance: float) -> nn.Module:
        if guidance == 1:
            return field
        return ClassifierFreeGuidance(field, scale=guidance, null_cond={"y": torch.tensor(NULL_LABEL)})

    def _need(self, what: str, families: tuple[str, ...]) -> None:
        if self.family not in families:
            raise ValueError(f"family: {what} needs a teacher of family {' or '.join(families)}, not {self.family}")


def teacher_loss(
    config: TeacherConfig, net: nn.Module, batch: tuple[torch.Tensor, torch.Tensor], generator: torch.Generator
) -> torch.Tensor:
    """The family's training loss of `net` (a ClassDiT, or its DDP wrapper) on (images (B, 1, S, S), labels (B,)),
    labels dropped to the null label with probability class_dropout; per element, so families compare."""
    x, y = batch
    drop = torch.rand(y.shape, generator=generator, device=generator.device).to(y.device)
    y = torch.where(drop < config.class_dropout, torch.full_like(y, NULL_LABEL), y)
    if config.family == "ddpm":
        schedule = DiscreteVP.linear()
        return ddpm_loss(DiTField(net, schedule=schedule), x, schedule, generator=generator, y=y)
    if config.family == "edm":
        denoiser = EDMPreconditioner(net, sigma_data=config.sigma_data)
        return edm_loss(denoiser, x, sigma_data=config.sigma_data, generator=generator, y=y) / x[0].numel()
    t = torch.rand(x.shape[0], generator=generator, device=generator.device).to(x)
    noise = torch.randn(x.shape, generator=generator, device=generator.device).to(x)
    path = AffinePath(CondOT()).sample(noise, x, t)
    return flow_matching_loss(net(x=path.x_t, t=t, y=y), path) / x[0].numel()


def train_teacher(config: TeacherConfig, *, progress: bool = False) -> DigitsTeacher:
    """A teacher of `config` trained afresh (EMA weights, eval mode); `digits_teacher` keeps the cached one."""
    data = load_digits_images(config.size, split="train")
    torch.manual_seed(config.seed)
    teacher = DigitsTeacher(config).to(config.device)
    images, labels = data.x.to(config.device), data.y.to(config.device)

    def batches(step: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        idx = torch.randint(0, images.shape[0], (config.batch_size,), generator=g).to(images.device)
        return images[idx], labels[idx]

    fit_with_ema(
        teacher.net,
        lambda model, batch, g: (teacher_loss(config, model, batch, g), {}),
        batches,
        steps=config.steps,
        lr=config.lr,
        ema_decay=config.ema_decay,
        device=config.device,
        generator=torch.Generator().manual_seed(config.seed),
        progress=progress,
    )
    return teacher.eval().requires_grad_(False)


def _build_teacher(config: TeacherConfig, folder: Path) -> None:
    teacher = train_teacher(config, progress=True)
    torch.save(cpu_state_dict(teacher), folder / "weights.pt")


def teacher_artifact(config: TeacherConfig) -> Artifact:
    """The cache entry of one teacher (for a scenario's `requires` and for `digits_teacher`)."""
    tokens = (config.size // config.patch) ** 2 / 16
    scale = tokens * (config.dim / 64) ** 2 * config.depth / 4 * config.batch_size / 128
    return Artifact(
        "vision.digits_teacher",
        build=_build_teacher,
        config=config,
        inputs=(digits_source(),),
        expected_seconds=max(1.0, config.steps * _STEP_SECONDS * scale),
        description=f"{config.family} class-conditional digits teacher, {config.size}x{config.size}, "
        f"{config.steps} steps",
    )


def digits_teacher(config: TeacherConfig, *, device: torch.device | str | None = None) -> DigitsTeacher:
    """The trained teacher of `config` (EMA weights, eval mode, no grad) on `device` (default: the one it was
    trained on), built into the cache on the first call."""
    entry = ensure(teacher_artifact(config))
    teacher = DigitsTeacher(config)
    teacher.load_state_dict(torch.load(entry.path / "weights.pt", map_location="cpu", weights_only=True))
    return teacher.to(device or config.device).eval().requires_grad_(False)
