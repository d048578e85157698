"""Affine Gaussian paths x_t = alpha_t x_1 + sigma_t x_0 and the prediction-conversion hub."""

from __future__ import annotations

import torch

from flowlab.core.paths.base import PathSample
from flowlab.core.schedules import Schedule, ScheduleOutput
from flowlab.core.typing import Prediction
from flowlab.core.validation import check_same_batch, check_tensor, check_time, expand_like

__all__ = ["AffinePath"]


class AffinePath:
    """x_t = alpha_t x_1 + sigma_t x_0 with target velocity dx_t = alpha'_t x_1 + sigma'_t x_0.

    `gaussian_source=True` (x_0 ~ N(0, I)) enables conversions to and from the score.
    """

    def __init__(self, schedule: Schedule, *, gaussian_source: bool = True) -> None:
        if not isinstance(schedule, Schedule):
            raise ValueError(f"schedule: expected a flowlab.core.schedules.Schedule, got {type(schedule).__name__}")
        self.schedule = schedule
        self.gaussian_source = gaussian_source

    def __repr__(self) -> str:
        return f"AffinePath({self.schedule!r})"

    def sample(self, x_0: torch.Tensor, x_1: torch.Tensor, t: torch.Tensor) -> PathSample:
        """x_0, x_1: (B, ...), t: (B,) -> PathSample"""
        check_tensor(x_0, "x_0")
        check_tensor(x_1, "x_1")
        batch = check_same_batch(x_0=x_0, x_1=x_1)
        if x_0.shape != x_1.shape:
            raise ValueError(f"x_0, x_1: shapes differ, {tuple(x_0.shape)} vs {tuple(x_1.shape)}")
        check_time(t, batch)
        s = self.schedule(expand_like(t, x_1))
        x_t = s.alpha * x_1 + s.sigma * x_0
        dx_t = s.d_alpha * x_1 + s.d_sigma * x_0
        return PathSample(x_0=x_0, x_1=x_1, t=t, x_t=x_t, dx_t=dx_t)

    def convert(
        self,
        value: torch.Tensor,
        *,
        x_t: torch.Tensor,
        t: torch.Tensor,
        source: Prediction | str,
        target: Prediction | str,
        at: ScheduleOutput | None = None,
    ) -> torch.Tensor:
        """Translate a model output between VELOCITY, EPSILON (x_0), DATA (x_1) and SCORE at (x_t, t).

        value, x_t: (B, ...); t: (B,). SCORE needs a Gaussian source (score = -E[x_0 | x_t] / sigma_t). at: the
        schedule at t when already computed (fields broadcastable against x_t, e.g. (1, 1, ..., 1) for a t shared by
        the batch); a sampler's loop passes it to skip the schedule call.
        """
        source, target = Prediction.parse(source), Prediction.parse(target)
        if source is target:
            return value
        if Prediction.SCORE in (source, target) and not self.gaussian_source:
            raise ValueError("source, target: score conversions need a Gaussian source (gaussian_source=True)")
        check_same_batch(value=value, x_t=x_t, t=t)
        s = self.schedule(expand_like(t, x_t)) if at is None else at
        eps = self._to_epsilon(value, x_t, s, source)
        if target is Prediction.EPSILON:
            return eps
        if target is Prediction.SCORE:
            return -eps / s.sigma
        data = (x_t - s.sigma * eps) / s.alpha
        if target is Prediction.DATA:
            return data
        return s.d_alpha * data + s.d_sigma * eps

    @staticmethod
    def _to_epsilon(value, x_t, s, source: Prediction) -> torch.Tensor:
        if source is Prediction.EPSILON:
            return value
        if source is Prediction.SCORE:
            return -s.sigma * value
        if source is Prediction.DATA:
            return (x_t - s.alpha * value) / s.sigma
        # velocity u = a' x_1 + s' x_0 with x_t = a x_1 + s x_0  =>  x_0 = (a u - a' x_t) / (a s' - a' s)
        return (s.alpha * value - s.d_alpha * x_t) / (s.alpha * s.d_sigma - s.d_alpha * s.sigma)
