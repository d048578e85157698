"""pi-Flow students: a backbone whose one call at (x_src, t_src) builds a network-free velocity policy.

    config = PiFlowConfig(method="piflow_gm", components=8)
    student = digits_student(config, teacher)            # a ClassDiT initialised from the teacher
    policy = student.policy(x, t, y=labels)              # GMPolicy / DXPolicy in core time (t = 1 data)

methods:
- "piflow_gm": a K-component Gaussian-mixture policy (`GMHead`), trained by imitation (pi-ID);
- "piflow_dx": an N-point data-grid policy (`DXHead`) over the rest of the path, [t_src, 1], trained by pi-ID;
- "x0_regression": the baseline that regresses one data prediction (a 1-point grid) onto the teacher's ODE
  endpoint;
- "dmd_lite": the same 1-point student trained by reverse-KL distribution matching with an online fake score.

A 1-point policy is a constant data prediction x̂_1, whose rollout to t_end is the deterministic DDIM step; so every
student samples through the same `sample_piflow`. One student serves every NFE of `config.nfe` (deviation: the
paper trains one student per NFE; segments here are drawn from all the configured grids).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from flowlab.core.config import Config
from flowlab.core.flowmaps import DXHead, GMHead, Policy
from flowlab.core.nets import TimeMLP
from flowlab.core.nets.seeding import seeded_init
from flowlab.vision_gen.kit.nets import ClassDiT
from flowlab.vision_gen.kit.teachers import DigitsTeacher

__all__ = ["METHODS", "PiFlowConfig", "Student", "digits_student", "make_head", "toy_student"]

METHODS = ("piflow_gm", "piflow_dx", "x0_regression", "dmd_lite")


@dataclass(frozen=True)
class PiFlowConfig(Config):
    """One distillation run. `method` one of METHODS; `components` K of the GM head, `points` N of the DX head;
    training segments from the grids of `nfe` (last segment `final_step_scale` times the others); pi-ID with
    `num_intermediate` visited states per segment, a `window_substeps` average-velocity window (0: the local
    velocity), GM component dropout `gm_dropout` in the detached rollout, the teacher ratio of trajectory mixing
    decaying 1 -> 0 over `mix_iters` steps (0: none), the loss times `rescale`, `substeps_per_unit` Euler sub-steps
    per unit time; x0 regression's teacher endpoint by `teacher_steps` Euler steps per unit time; the teacher's
    classifier-free `guidance`; `steps` Adam steps of `batch_size` (one-cycle to `lr`), EMA `ema_decay`; `seed`
    seeds the student's initialisation and the training draws."""

    method: str = "piflow_gm"
    components: int = 8
    points: int = 10
    nfe: tuple[int, ...] = (1, 2, 4)
    num_intermediate: int = 2
    window_substeps: int = 0
    gm_dropout: float = 0.05
    mix_iters: int = 500
    final_step_scale: float = 1.0
    rescale: float = 3.0
    substeps_per_unit: int = 128
    teacher_steps: int = 16
    guidance: float = 1.0
    steps: int = 2000
    batch_size: int = 128
    lr: float = 3e-4
    ema_decay: float = 0.99
    init_spread: float = 0.3
    max_logstd: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.method not in METHODS:
            raise ValueError(f"method: expected one of {METHODS}, got {self.method!r}")
        for name in ("components", "points", "num_intermediate", "substeps_per_unit", "teacher_steps", "steps",
                     "batch_size"):  # fmt: skip
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: expected a positive integer, got {getattr(self, name)!r}")
        if not math.isfinite(self.guidance):
            raise ValueError(f"guidance: expected a finite number, got {self.guidance!r}")
        if not self.nfe or any(n < 1 for n in self.nfe):
            raise ValueError(f"nfe: expected positive step counts, got {self.nfe!r}")
        if not 0 <= self.gm_dropout < 1:
            raise ValueError(f"gm_dropout: expected a probability in [0, 1), got {self.gm_dropout!r}")
        if self.window_substeps < 0 or self.mix_iters < 0:
            raise ValueError("window_substeps, mix_iters: expected non-negative integers")
        if not 0 < self.final_step_scale <= 1:
            raise ValueError(f"final_step_scale: expected a value in (0, 1], got {self.final_step_scale!r}")
        if not (self.lr > 0 and self.rescale > 0 and 0 <= self.ema_decay < 1 and self.init_spread >= 0):
            raise ValueError("lr, rescale, ema_decay, init_spread: expected lr, rescale > 0, ema_decay in [0, 1), "
                             "init_spread >= 0")  # fmt: skip


def make_head(config: PiFlowConfig) -> GMHead | DXHead:
    """The policy head of the config's method (a 1-point DX head for the baselines)."""
    if config.method == "piflow_gm":
        return GMHead(config.components, max_logstd=config.max_logstd)
    return DXHead(config.points if config.method == "piflow_dx" else 1)


class Student(nn.Module):
    """A backbone `backbone(x=, t=, **cond) -> raw` and a head: `policy(x, t, **cond)` (also the forward, so a
    DDP wrapper calls it) is the policy built at (x_src = x: (B, ...), t_src = t: (B,)); a DX head's grid spans
    [t, 1]."""

    def __init__(self, backbone: nn.Module, head: GMHead | DXHead) -> None:
        super().__init__()
        self.backbone, self.head = backbone, head

    def forward(self, *, x: torch.Tensor, t: torch.Tensor, **cond) -> Policy:
        """The same as `policy(x, t, **cond)`, so that a DDP wrapper calls it."""
        return self.policy(x, t, **cond)

    def policy(self, x: torch.Tensor, t: torch.Tensor, **cond) -> Policy:
        """The head's policy built from the backbone's output at x_src = x: (B, ...), t_src = t: (B,) (a DX head's grid
        spanning `[t, 1]`)."""
        raw = self.backbone(x=x, t=t, **cond)
        if isinstance(self.head, GMHead):
            return self.head(raw, x, t)
        return self.head(raw, x, t, torch.ones_like(t))


def _widen_output(out: nn.Linear, teacher_out: nn.Linear, head: GMHead | DXHead, patch: int, spread: float) -> None:
    """Fill the student's output layer from the teacher's (one channel per image): every mean (or grid point)
    channel gets the teacher's velocity rows, GM means offset by N(0, spread^2) biases per component so the
    components differ; logits and log-stds start at 0 (equal weights, std = 1 - t_src)."""
    width = out.out_features // (patch * patch)
    slots = head.num_components if isinstance(head, GMHead) else head.num_points
    w_t = teacher_out.weight.detach().reshape(patch * patch, 1, -1)
    b_t = teacher_out.bias.detach().reshape(patch * patch, 1)
    with torch.no_grad():
        weight = out.weight.reshape(patch * patch, width, -1)
        bias = out.bias.reshape(patch * patch, width)
        weight.zero_(), bias.zero_()
        weight[:, :slots] = w_t
        bias[:, :slots] = b_t
        if isinstance(head, GMHead) and spread > 0:
            bias[:, :slots] += spread * torch.randn(patch * patch, slots)


def digits_student(config: PiFlowConfig, teacher: DigitsTeacher) -> Student:
    """A student with the teacher's ClassDiT (same width and depth), every weight copied from the rf teacher but
    the widened output layer (`_widen_output`); on the teacher's device. Seeded by config.seed."""
    if teacher.family != "rf":
        raise ValueError(f"teacher: pi-Flow distils a rectified-flow teacher (family rf), got {teacher.family}")
    head = make_head(config)
    tc = teacher.config
    with seeded_init(config.seed):
        net = ClassDiT(tc.size, 1, patch=tc.patch, dim=tc.dim, depth=tc.depth, heads=tc.heads,
                       out_channels=head.out_channels(1))  # fmt: skip
        state = {k: v for k, v in teacher.net.state_dict().items() if not k.startswith("net.out.")}
        net.load_state_dict(state, strict=False)
        _widen_output(net.net.out, teacher.net.net.out, head, tc.patch, config.init_spread)
    device = next(teacher.parameters()).device
    return Student(net, head).to(device)


def toy_student(config: PiFlowConfig, *, dim: int = 2, hidden: tuple[int, ...] = (256, 256, 256)) -> Student:
    """A student for 2-D toys, an MLP over [x, e(t)] trained from scratch. Seeded by config.seed."""
    head = make_head(config)
    with seeded_init(config.seed):
        net = TimeMLP(dim, hidden=hidden, out_dim=head.out_channels(dim))
    return Student(net, head)
