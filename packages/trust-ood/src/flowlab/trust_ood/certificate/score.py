"""The certificate: c(x*) = log p(x*, Psi(x*)) per dimension from a score model's probability-flow ODE, and its
variants, calibration threshold and error model.

The likelihood is the core's `likelihood.log_likelihood` on the velocity field the score implies
(`AffinePath.convert(score, source="score", target="velocity")`: v = g(tau)^2 s / 2 in core time), integrated
from t = 1 - EPS (tau = EPS) to t = 0 (tau = 1), where the source is N(0, s(1)^2 I),
s(1)^2 = (sigma^2 - 1) / (2 ln sigma).
A whole batch is one call: samples x Hutchinson probes are vectorised inside the core integrator.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, get_args

import torch
from torch import nn

from flowlab.core import grids
from flowlab.core.distributions import StandardNormal
from flowlab.core.likelihood import log_likelihood
from flowlab.core.schedules import Schedule
from flowlab.trust_ood.certificate.joint_model import EPS, JointScoreModel
from flowlab.trust_ood.certificate.names import VARIANTS

__all__ = [
    "SPACINGS",
    "VARIANTS",
    "CertificateResult",
    "DensityModels",
    "ErrorModel",
    "calibrate_threshold",
    "certificate",
    "field_log_likelihood",
    "likelihood_grid",
    "score_velocity",
]

Spacing = Literal["log_sigma", "tau"]
SPACINGS: tuple[str, ...] = get_args(Spacing)


@dataclass(frozen=True)
class DensityModels:
    """The score models a certificate may need: `joint` over (x, y) channels, `input` over x, `output` over y."""

    joint: JointScoreModel | None = None
    input: JointScoreModel | None = None
    output: JointScoreModel | None = None


@dataclass(frozen=True)
class CertificateResult:
    """score: (B,) the certificate in bits per dimension (log-likelihood / (D ln 2), higher = more trusted);
    log_prob: (B,) nats (for "y|x"/"x|y": the conditional log-density); prediction: (B, 1, N) Psi's output;
    variant; nfe: network evaluations per likelihood solve."""

    score: torch.Tensor
    log_prob: torch.Tensor
    prediction: torch.Tensor
    variant: str
    nfe: int


def score_velocity(model: JointScoreModel) -> Callable[..., torch.Tensor]:
    """The probability-flow velocity field(x=z, t=t) of a score model, via the core's prediction conversion."""

    def field(*, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return model.path.convert(model(x=x, t=t), x_t=x, t=t, source="score", target="velocity")

    return field


def likelihood_grid(
    steps: int,
    schedule: Schedule | None = None,
    *,
    spacing: str = "log_sigma",
    eps: float = EPS,
    device=None,
    dtype=torch.float32,
) -> torch.Tensor:
    """(steps + 1,) decreasing core times from 1 - eps (tau = eps) to 0 (tau = 1).

    spacing "log_sigma" (default; needs the `schedule`): equally spaced in log s(tau), the core's
    `grids.logsnr_uniform` (alpha = 1 under VE). The integrand g^2 div s / 2 lives where s is small, and s(tau) ~
    sqrt(tau) there, so a grid uniform in tau (spacing "tau") puts s from 0.003 to 0.3 into its first step (sigma = 25,
    12 steps)."""
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps: expected a positive int, got {steps!r}")
    if not 0 < eps < 1:
        raise ValueError(f"eps: expected 0 < eps < 1, got {eps!r}")
    if spacing == "tau":
        return torch.linspace(1 - eps, 0.0, steps + 1, device=device, dtype=dtype)
    if spacing != "log_sigma":
        raise ValueError(f"spacing: expected one of {SPACINGS}, got {spacing!r}")
    if schedule is None:
        raise ValueError('schedule: spacing "log_sigma" needs the score model\'s schedule')
    grid = grids.logsnr_uniform(steps, schedule, t_start=0.0, t_end=1 - eps, dtype=torch.float64).flip(0)
    return grid.to(device=device, dtype=dtype)


def field_log_likelihood(
    field: Callable[..., torch.Tensor],
    z: torch.Tensor,
    *,
    prior_std: float,
    grid: torch.Tensor,
    method: str = "rk4",
    divergence: str = "hutchinson",
    num_probes: int = 2,
    generator: torch.Generator | None = None,
    batch_size: int = 512,
) -> tuple[torch.Tensor, int]:
    """log p(z) in nats, z: (B, ...), of the flow `field` whose t=0 marginal is N(0, prior_std^2 I), integrated over
    the decreasing core-time `grid` (see `likelihood_grid`), in chunks of `batch_size` samples (each chunk: samples x
    probes in one vectorised call). Returns (log_prob (B,), nfe)."""
    source = StandardNormal(tuple(z.shape[1:]), scale=prior_std)
    grid = grid.to(device=z.device, dtype=z.dtype)
    out, nfe = [], 0
    with torch.no_grad():
        for chunk in z.split(batch_size):
            res = log_likelihood(field, chunk, source=source, grid=grid, method=method, divergence=divergence,
                                 num_probes=num_probes, generator=generator, force=True)  # fmt: skip
            out.append(res.log_prob)
            nfe = res.nfe
    return torch.cat(out), nfe


def _model_log_prob(model, fields, *, steps, spacing, method, divergence, num_probes, generator, batch_size):
    model.check_fields(fields, "fields")
    was = model.training
    model.eval()
    try:
        prior_std = float(model.schedule(torch.zeros(1)).sigma)
        grid = likelihood_grid(steps, model.schedule, spacing=spacing)
        logp, nfe = field_log_likelihood(
            score_velocity(model), model.standardise(fields), prior_std=prior_std, grid=grid, method=method,
            divergence=divergence, num_probes=num_probes, generator=generator, batch_size=batch_size,
        )  # fmt: skip
    finally:
        model.train(was)
    return logp + model.log_det, nfe


def _fork(generator: torch.Generator | None) -> torch.Generator | None:
    """A copy of `generator`'s state, so every component of a variant draws the probes a lone call would."""
    if generator is None:
        return None
    g = torch.Generator(generator.device)
    g.set_state(generator.get_state())
    return g


def certificate(
    models: DensityModels,
    regressor: nn.Module | Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    x: torch.Tensor,
    param: torch.Tensor,
    *,
    variant: str = "x&y",
    steps: int = 50,
    spacing: str = "log_sigma",
    method: str = "rk4",
    divergence: str = "hutchinson",
    num_probes: int = 2,
    generator: torch.Generator | None = None,
    batch_size: int = 512,
) -> CertificateResult:
    """The certificate of `regressor`'s predictions on x: (B, 1, N) with task parameters param: (B,).

    variant: "x&y" joint log p(x, Psi(x)) (the method), "x" input-only, "y" output-only, "y|x" = joint - input,
    "x|y" = joint - output; the score is per dimension of the scored part, in bits. The ODE takes `steps` steps of
    `method` on the `spacing` grid (`likelihood_grid`). Probes come from `generator`
    (each component of a conditional variant draws from a copy of its state, so "y|x" equals "x&y" minus "x" called
    with the same seed). The ground truth never enters: the joint model scores Psi's prediction."""
    if variant not in VARIANTS:
        raise ValueError(f"variant: expected one of {VARIANTS}, got {variant!r}")
    need = {"x&y": ("joint",), "x": ("input",), "y": ("output",), "y|x": ("joint", "input"), "x|y": ("joint", "output")}
    missing = [name for name in need[variant] if getattr(models, name) is None]
    if missing:
        raise ValueError(f"models: variant {variant!r} needs the {', '.join(missing)} score model(s)")
    ref = getattr(models, need[variant][0])
    length = ref.length
    if not isinstance(x, torch.Tensor) or x.dim() != 3 or x.shape[1] != 1 or x.shape[2] != length:
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"x: expected shape (B, 1, {length}) on the score model's grid, got {shape}")
    if not bool(torch.isfinite(x).all()):
        raise ValueError("x: contains NaN or inf values")
    if not isinstance(param, torch.Tensor) or param.shape != (x.shape[0],) or not bool(torch.isfinite(param).all()):
        raise ValueError(f"param: expected a finite tensor of shape ({x.shape[0]},)")
    with torch.inference_mode():
        was = getattr(regressor, "training", None)
        if was is not None:
            regressor.eval()
        try:
            prediction = regressor(x, param)
        finally:
            if was is not None:
                regressor.train(was)
    if not isinstance(prediction, torch.Tensor) or prediction.shape != x.shape:
        shape = tuple(prediction.shape) if isinstance(prediction, torch.Tensor) else type(prediction).__name__
        raise ValueError(f"regressor: expected an output of shape {tuple(x.shape)} (like x), got {shape}")
    prediction = prediction.clone()
    if not bool(torch.isfinite(prediction).all()):
        raise ValueError("regressor: returned NaN or inf values")
    fields = {"joint": torch.cat([x, prediction], dim=1), "input": x, "output": prediction}
    opts = dict(
        steps=steps, spacing=spacing, method=method, divergence=divergence, num_probes=num_probes, batch_size=batch_size
    )
    parts, nfe = {}, 0
    for name in need[variant]:
        parts[name], nfe = _model_log_prob(getattr(models, name), fields[name], generator=_fork(generator), **opts)
    if generator is not None:  # advance the caller's generator past the probes used
        torch.randn(1, generator=generator, device=generator.device)
    log_prob = parts[need[variant][0]] if len(parts) == 1 else parts["joint"] - parts[need[variant][1]]
    dims = length * (2 if variant == "x&y" else 1)
    return CertificateResult(log_prob / (dims * math.log(2)), log_prob, prediction, variant, nfe)


def calibrate_threshold(scores_id: torch.Tensor, *, k: float = 1.5) -> float:
    """median - k * std of in-distribution certificate scores (the paper's rule; std with Bessel's correction);
    a score below it is flagged OOD."""
    s = torch.as_tensor(scores_id, dtype=torch.float64).flatten()
    if s.numel() < 2 or not bool(torch.isfinite(s).all()):
        raise ValueError("scores_id: expected at least two finite scores")
    if not (isinstance(k, (int, float)) and math.isfinite(k) and k >= 0):
        raise ValueError(f"k: expected a non-negative number, got {k!r}")
    return float(s.median() - k * s.std())


@dataclass(frozen=True)
class ErrorModel:
    """err ~= a * exp(-b * c): a least-squares line through (c, log err)."""

    a: float
    b: float

    @staticmethod
    def fit(scores: torch.Tensor, errors: torch.Tensor) -> ErrorModel:
        """Fits a and b by least squares of log err on c: scores, errors: (N,) with N >= 2 and positive errors."""
        c = torch.as_tensor(scores, dtype=torch.float64).flatten()
        e = torch.as_tensor(errors, dtype=torch.float64).flatten()
        if c.shape != e.shape or c.numel() < 2:
            raise ValueError(f"scores, errors: expected two equal-length 1-D sets of >= 2, got {c.shape}, {e.shape}")
        if not bool((e > 0).all()) or not bool(torch.isfinite(c).all()):
            raise ValueError("errors: expected positive errors and finite scores")
        design = torch.stack([torch.ones_like(c), -c], dim=1)
        coef = torch.linalg.lstsq(design, torch.log(e)[:, None]).solution.flatten()
        return ErrorModel(a=float(torch.exp(coef[0])), b=float(coef[1]))

    def predict(self, scores: torch.Tensor) -> torch.Tensor:
        """The predicted errors `a * exp(-b * c)` of `scores`, in float64 and of their shape."""
        return self.a * torch.exp(-self.b * torch.as_tensor(scores, dtype=torch.float64))
