"""Output heads of pi-Flow students: parameter-free splits of a backbone's raw output into a velocity policy.

A backbone built with `head.out_channels(C)` output channels (for an event (C, *spatial)) returns raw: (B,
head.out_channels(C), *spatial); the head turns it into a `GMPolicy` or a `DXPolicy` at the source (x_src, t_src).
Both parametrise data predictions in core-velocity units, x̂_1 = x_src + (1 - t_src) u, as the teacher does, so a
student whose every component (or grid point) outputs the teacher's velocity starts as the teacher's one-step
prediction.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from flowlab.core.flowmaps.policies import DXPolicy, GMPolicy
from flowlab.core.nets.mlp import _check_positive_int
from flowlab.core.validation import check_tensor, expand_like

__all__ = ["DXHead", "GMHead"]


def _check_raw(raw: torch.Tensor, x_src: torch.Tensor, channels: int) -> None:
    check_tensor(raw, "raw", min_dim=2)
    check_tensor(x_src, "x_src")
    want = (x_src.shape[0], channels, *x_src.shape[2:])
    if tuple(raw.shape) != want:
        raise ValueError(f"raw: expected the backbone's output of shape {want}, got {tuple(raw.shape)}")


class GMHead(nn.Module):
    """K-component Gaussian-mixture head. raw channels [K C means | K logits | K log-stds], each per position;
    the logits stay per position (an independent mixture per spatial position, Gaussian over the C channels) and
    the log-stds are averaged over the positions (one per component, pi-Flow's shared log-std), then, when
    `max_logstd` is given, softly capped: max_logstd - softplus(max_logstd - logstd). Without a cap a component
    can grow so wide that its mean stops mattering (the posterior falls back to the straight line through x_src
    and x_t), a flat local optimum that pi-ID training falls into on the toys."""

    def __init__(self, num_components: int, *, max_logstd: float | None = None) -> None:
        super().__init__()
        self.num_components = _check_positive_int(num_components, "num_components")
        if max_logstd is not None and not math.isfinite(max_logstd):
            raise ValueError(f"max_logstd: expected a finite number or None, got {max_logstd!r}")
        self.max_logstd = max_logstd

    def out_channels(self, channels: int) -> int:
        """Backbone output channels for an event of `channels` channels C: K (C + 2) (means, logits, log-stds)."""
        return self.num_components * (_check_positive_int(channels, "channels") + 2)

    def forward(self, raw: torch.Tensor, x_src: torch.Tensor, t_src: torch.Tensor) -> GMPolicy:
        """raw: (B, K (C + 2), *spatial), x_src: (B, C, *spatial), t_src: (B,) -> GMPolicy"""
        k, c = self.num_components, int(x_src.shape[1]) if x_src.dim() > 1 else 0
        _check_raw(raw, x_src, self.out_channels(c))
        batch, spatial = raw.shape[0], tuple(raw.shape[2:])
        means = raw[:, : k * c].reshape(batch, k, c, *spatial)
        logits = raw[:, k * c : k * (c + 1)].reshape(batch, k, 1, *spatial)
        logstd = raw[:, k * (c + 1) :].reshape(batch, k, 1, *spatial)
        if spatial:
            logstd = logstd.mean(dim=tuple(range(3, logstd.dim())), keepdim=True)
        if self.max_logstd is not None:
            logstd = self.max_logstd - F.softplus(self.max_logstd - logstd)
        return GMPolicy(means, logstd, logits, x_src, t_src)


class DXHead(nn.Module):
    """N-point data-grid head: raw channels [N C] are N velocities u_n, the data predictions
    x̂_n = x_src + (1 - t_src) u_n at N times evenly spaced from t_src to t_end (the policy's horizon)."""

    def __init__(self, num_points: int) -> None:
        super().__init__()
        self.num_points = _check_positive_int(num_points, "num_points")

    def out_channels(self, channels: int) -> int:
        """Backbone output channels for an event of `channels` channels C: N C (one velocity per grid point)."""
        return self.num_points * _check_positive_int(channels, "channels")

    def forward(self, raw: torch.Tensor, x_src: torch.Tensor, t_src: torch.Tensor, t_end: torch.Tensor) -> DXPolicy:
        """raw: (B, N C, *spatial), x_src: (B, C, *spatial), t_src, t_end: (B,) with t_end > t_src -> DXPolicy"""
        n, c = self.num_points, int(x_src.shape[1]) if x_src.dim() > 1 else 0
        _check_raw(raw, x_src, self.out_channels(c))
        for name, value in (("t_src", t_src), ("t_end", t_end)):
            if not isinstance(value, torch.Tensor) or tuple(value.shape) != (x_src.shape[0],):
                raise ValueError(f"{name}: expected shape ({x_src.shape[0]},) (one time per sample)")
        if bool((t_end <= t_src).any()):
            raise ValueError("t_end: expected the horizon after t_src (t_end > t_src)")
        batch = raw.shape[0]
        velocities = raw.reshape(batch, n, c, *raw.shape[2:])
        data = x_src.unsqueeze(1) + expand_like(1 - t_src, velocities) * velocities
        fraction = torch.linspace(0, 1, n, device=raw.device, dtype=t_src.dtype) if n > 1 else t_src.new_zeros(1)
        t_grid = t_src[:, None] + (t_end - t_src)[:, None] * fraction
        return DXPolicy(data, t_grid)
