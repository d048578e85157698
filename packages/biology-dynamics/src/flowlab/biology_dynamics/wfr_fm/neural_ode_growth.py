"""Simulation-trained growth neural ODE (TIGON / DeepRUOT-style baseline): v and g are learned by integrating
weighted particles through the ODE and matching the observed populations at every time point.

Loss per step: Σ_k [W1(weighted particles at t_k, cells at t_k) + mass_weight · (ln mean w_k − ln(N_k / N_0))²],
with W1 the exact earth mover's distance (POT, differentiable in positions and weights). Each step integrates the
whole time course, which is what WFR-FM avoids.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch
from torch import nn

from flowlab.biology_dynamics.wfr_fm.model import TimeCourseModel, check_training_fields
from flowlab.biology_dynamics.wfr_fm.sample import simulate_particles
from flowlab.core.config import Config
from flowlab.core.distributions import randint
from flowlab.core.metrics import wasserstein
from flowlab.core.train import EMA, fit

__all__ = ["GrowthNeuralODE", "NeuralODEConfig"]


@dataclass(frozen=True)
class NeuralODEConfig(Config):
    """batch: particles simulated per step (and cells drawn per time point); solver: "rk4" with `step_size` (in
    normalised time) or an adaptive core method ("dopri5"); adjoint: backpropagate with the adjoint method."""

    v_hidden: tuple[int, ...] = (128,) * 3
    g_hidden: tuple[int, ...] = (128,) * 2
    act: str = "tanh"
    time_scale: float = 30.0
    time_embed_dim: int = 32
    iters: int = 500
    batch: int = 256
    lr: float = 3e-3
    lr_min: float = 1e-4
    ema: float | None = None
    solver: str = "rk4"
    step_size: float = 0.05
    adjoint: bool = False
    mass_weight: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        check_training_fields(self)
        if not (self.step_size > 0 and math.isfinite(self.step_size)):
            raise ValueError(f"step_size: expected a positive step, got {self.step_size!r}")
        if not self.mass_weight >= 0:
            raise ValueError(f"mass_weight: expected a non-negative weight, got {self.mass_weight!r}")


class _SimulationLoss:
    def __init__(self, tau: torch.Tensor, log_mass: torch.Tensor, cfg: NeuralODEConfig) -> None:
        self.tau, self.log_mass, self.cfg = tau, log_mass, cfg

    def __call__(self, model: nn.Module, batch: dict[str, torch.Tensor], generator: torch.Generator):
        c = self.cfg
        opts = {"method": c.solver, "adjoint": c.adjoint}
        if c.solver == "rk4":
            opts["step_size"] = c.step_size
        traj = simulate_particles(model, batch["x0"], self.tau.to(batch["x0"]), **opts)
        w1 = torch.zeros((), device=batch["x0"].device)
        mass = torch.zeros((), device=batch["x0"].device)
        for k in range(1, self.tau.shape[0]):
            w = traj.log_w[k].exp()
            w1 = w1 + wasserstein(traj.x[k], batch["y"][:, k - 1], p=1, a=w)
            mass = mass + (traj.log_w[k].exp().mean().log() - self.log_mass[k]).square()
        return w1 + c.mass_weight * mass, {"w1": w1.detach(), "mass": mass.detach()}


class GrowthNeuralODE(TimeCourseModel):
    """Velocity and growth MLPs trained through the ODE solver on the observed marginals (no couplings)."""

    method = "neural_ode"
    config_cls = NeuralODEConfig

    def _train(self, series, *, device, generator, callbacks, progress) -> None:
        c = self.config
        start = time.perf_counter()
        X = [x.to(device) for x in series.X]
        t = torch.tensor(series.times, dtype=torch.float64)
        tau = ((t - t[0]) / (t[-1] - t[0])).to(torch.float32)
        counts = torch.tensor(series.counts, dtype=torch.float32)
        log_mass = (counts / counts[0]).log().to(device)

        def data(step: int, gen: torch.Generator) -> dict[str, torch.Tensor]:
            def draw(x: torch.Tensor) -> torch.Tensor:
                return x[randint(x.shape[0], (c.batch,), generator=gen, device=x.device)]

            return {"x0": draw(X[0]), "y": torch.stack([draw(x) for x in X[1:]], dim=1)}

        groups = [{"params": list(self.fields.v.parameters())}, {"params": list(self.fields.g.parameters())}]
        optimizer = torch.optim.Adam(groups, lr=c.lr)
        schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=c.iters, eta_min=c.lr_min)
        averager = EMA(self.fields, decay=c.ema) if c.ema else None
        self.result = fit(
            self.fields,
            _SimulationLoss(tau, log_mass, c),
            data,
            steps=c.iters,
            optimizer=optimizer,
            lr_schedule=schedule,
            ema=averager,
            grad_clip=1.0,
            device=device,
            generator=generator,
            callbacks=callbacks,
            log_every=max(1, math.ceil(c.iters / 20)),
            progress=progress,
        )
        if averager is not None:
            self.fields.load_state_dict(averager.shadow)
        self.state.train_seconds = time.perf_counter() - start
        self.state.history = [dict(r) for r in self.result.history]
