"""The CMT configs and the consistency student: the kit teacher's `ClassDiT` inside the core's `ECMPreconditioner`,
initialised at random, from the diffusion teacher, or from a mid-trained checkpoint.

    student = consistency_student(teacher, init="diffusion")      # f(x=, sigma=(B,), y=(B,)) -> clean image
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch

from flowlab.core.config import Config
from flowlab.core.nets import ECMPreconditioner
from flowlab.vision_gen.kit.nets import ClassDiT
from flowlab.vision_gen.kit.teachers import DigitsTeacher

__all__ = [
    "BRANCHES",
    "INITS",
    "METRICS",
    "POST_METHODS",
    "MidConfig",
    "PostConfig",
    "consistency_student",
    "student_network",
]

#: the initialisations of post-training
INITS = ("random", "diffusion", "cmt")
#: the distances of mid-training, named by what they compute: the pseudo-Huber sqrt(|a - b|^2 + c^2) - c,
#: the squared L2 sum, the L2 norm (the official code's "MAE")
METRICS = ("pseudo_huber", "l2", "l2_norm")
#: post-training: ECT with a constant small step (CMT's), ECT with the doubling schedule, consistency distillation,
#: MeanFlow (a two-time student, `meanflow.py`)
POST_METHODS = ("ect", "ect_doubling", "cd", "meanflow")
#: mid-training targets: the trajectory's endpoint (CMT for consistency models) or the average velocity between two
#: of its points (CMT-MF, for MeanFlow)
BRANCHES = ("consistency", "meanflow")


def _check_positive(value: object, name: str, *, integer: bool = False) -> None:
    kind = int if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kind) or not value > 0:
        raise ValueError(f"{name}: expected a positive {'int' if integer else 'number'}, got {value!r}")


@dataclass(frozen=True)
class MidConfig(Config):
    """Mid-training: `steps` Adam steps (lr decayed linearly to 0) of `batch_size` (state, endpoint) pairs, i.e.
    batch_size / nfe teacher trajectories of `nfe` DPM-Solver++ (`solver`) steps on the log-SNR-uniform grid from
    sigma_max to sigma_min, every state regressed onto its trajectory's endpoint with `metric` (branch "consistency"),
    or onto the average velocity to a later point of its trajectory (branch "meanflow", CMT-MF); EMA `ema_decay`."""

    branch: str = "consistency"
    steps: int = 600
    batch_size: int = 128
    nfe: int = 16
    solver: str = "dpmpp_3m"
    metric: str = "pseudo_huber"
    lr: float = 5e-4
    ema_decay: float = 0.99
    sigma_min: float = 0.002
    sigma_max: float = 80.0
    seed: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("steps", "batch_size", "nfe"):
            _check_positive(getattr(self, name), name, integer=True)
        if self.batch_size % self.nfe:
            raise ValueError(f"batch_size: expected a multiple of nfe = {self.nfe} (whole trajectories), got "
                             f"{self.batch_size}")  # fmt: skip
        if self.solver not in ("dpmpp_2m", "dpmpp_3m"):
            raise ValueError(f"solver: expected dpmpp_2m or dpmpp_3m, got {self.solver!r}")
        if self.metric not in METRICS:
            raise ValueError(f"metric: expected one of {METRICS}, got {self.metric!r}")
        if self.branch not in BRANCHES:
            raise ValueError(f"branch: expected one of {BRANCHES}, got {self.branch!r}")
        _check_positive(self.lr, "lr")
        if not 0 <= self.ema_decay < 1:
            raise ValueError(f"ema_decay: expected a value in [0, 1), got {self.ema_decay!r}")
        if not 0 < self.sigma_min < self.sigma_max:
            raise ValueError(f"sigma_min, sigma_max: expected 0 < sigma_min < sigma_max, got {self.sigma_min}, "
                             f"{self.sigma_max}")  # fmt: skip


@dataclass(frozen=True)
class PostConfig(Config):
    """Post-training by `method` for `steps` Adam steps at `lr` (constant) on `batch_size` real digits: the ECM loss
    with ln t ~ N(p_mean, p_std^2), pairing constant q (stage 0; "ect", "cd") or doubling (q = 2, one stage every
    steps / stages steps; "ect_doubling"); pseudo-Huber c (None: 0.00054 sqrt(D)); for "meanflow" the times of
    `meanflow.meanflow_post_loss` (mf_*); EMA `ema_decay`; measured every `eval_every` steps (0: only at the end)."""

    method: str = "ect"
    steps: int = 400
    batch_size: int = 128
    lr: float = 2e-4
    q: float = 4096.0
    stages: int = 8
    k: float = 8.0
    b: float = 1.0
    p_mean: float = -1.1
    p_std: float = 2.0
    c: float | None = None
    mf_unequal: float = 0.25
    mf_p_mean: float = -0.4
    mf_p_std: float = 1.0
    ema_decay: float = 0.99
    eval_every: int = 100
    seed: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.method not in POST_METHODS:
            raise ValueError(f"method: expected one of {POST_METHODS}, got {self.method!r}")
        for name in ("steps", "batch_size", "stages"):
            _check_positive(getattr(self, name), name, integer=True)
        _check_positive(self.lr, "lr")
        if not self.q > 1:
            raise ValueError(f"q: expected a number > 1, got {self.q!r}")
        if not 0 <= self.ema_decay < 1:
            raise ValueError(f"ema_decay: expected a value in [0, 1), got {self.ema_decay!r}")
        if not 0 <= self.mf_unequal <= 1 or not self.mf_p_std > 0:
            raise ValueError("mf_unequal, mf_p_std: expected a share in [0, 1] and a positive number")
        if not (isinstance(self.eval_every, int) and self.eval_every >= 0):
            raise ValueError(f"eval_every: expected an int >= 0, got {self.eval_every!r}")

    def pairing(self, step: int) -> tuple[float, int]:
        """(q, stage) of the ECM pairing at training step `step` (0-based)."""
        if self.method == "ect_doubling":
            return 2.0, min(self.stages - 1, step * self.stages // self.steps)
        return self.q, 0


def student_network(teacher: DigitsTeacher, *, init: str, seed: int = 0) -> ClassDiT:
    """The network a student starts from, on the teacher's device: a copy of the edm teacher's `ClassDiT` for
    "diffusion" (and "cmt", whose weights the caller then loads), fresh weights drawn from `seed` for "random"."""
    if init not in INITS:
        raise ValueError(f"init: expected one of {INITS}, got {init!r}")
    if not isinstance(teacher, DigitsTeacher) or teacher.family != "edm":
        raise ValueError("teacher: expected the kit's edm DigitsTeacher (TeacherConfig(family='edm'))")
    if init != "random":
        return copy.deepcopy(teacher.net)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        net = DigitsTeacher(teacher.config).net
    return net.to(next(teacher.parameters()).device)


def consistency_student(
    teacher: DigitsTeacher, *, init: str, seed: int = 0, sigma_min: float = 0.002
) -> ECMPreconditioner:
    """f(x=, sigma=(B,), y=(B,)): the `student_network` of `init` inside `ECMPreconditioner` (sigma_data of the
    teacher). Training mode, requires grad."""
    net = student_network(teacher, init=init, seed=seed)
    student = ECMPreconditioner(net, sigma_data=teacher.config.sigma_data, sigma_min=sigma_min)
    return student.train().requires_grad_(True)
