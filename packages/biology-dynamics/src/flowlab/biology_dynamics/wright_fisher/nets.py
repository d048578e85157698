"""Networks over letter sequences shared by Wright-Fisher diffusion and its baselines: each reads a per-position
input (a point of the simplex, a one-hot letter, a sufficient statistic or an embedding) and returns per-position
logits over the alphabet.

- `SequenceMLP`: flattens (L, K) and runs the core's `TimeMLP` (or, with `times=False`, its `MLP`, for the
  sufficient-statistic parametrisation whose network never sees the time).
- `SequenceCNN`: dilated residual convolutions with FiLM time conditioning (the DNA denoiser), optional
  class conditioning (a label embedding added to the FiLM input) or profile conditioning (the per-window oracle
  profile, in units of `PROFILE_SCALE` bits and repeated over each window's letters, as extra input channels).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from flowlab.core.nets import MLP, SinusoidalEmbedding, TimeMLP

__all__ = ["PROFILE_SCALE", "SequenceCNN", "SequenceMLP", "check_sequence_input", "profile_channels"]

#: bits per unit of a profile channel: oracle scores span about -35 to +16 bits (std 4-13), so channels are O(1)
PROFILE_SCALE = 10.0


def check_sequence_input(x: object, length: int, channels: int) -> torch.Tensor:
    """x: (B, length, channels) float, else a ValueError naming the expected shape."""
    if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.dim() != 3:
        raise ValueError(f"x: expected a (B, {length}, {channels}) float tensor, got {x!r:.60}")
    if tuple(x.shape[1:]) != (length, channels):
        raise ValueError(f"x: expected shape (B, {length}, {channels}), got {tuple(x.shape)}")
    return x


class SequenceMLP(nn.Module):
    """`net(x=x, t=t[, cond=c]) -> logits`: x (B, L, C), t (B,), cond (B, cond_dim) -> (B, L, K). With
    `times=False` the network takes no time (`net(x=x)`)."""

    def __init__(
        self,
        length: int,
        letters: int,
        *,
        channels: int | None = None,
        hidden: Sequence[int] = (256,) * 3,
        times: bool = True,
        cond_dim: int = 0,
    ) -> None:
        super().__init__()
        self.length, self.letters = length, letters
        self.channels = letters if channels is None else channels
        self.times = times
        dim, out = length * self.channels, length * letters
        if times:
            self.net = TimeMLP(dim, cond_dim=cond_dim, hidden=hidden, out_dim=out, time_scale=100.0)
        else:
            if cond_dim:
                raise ValueError("cond_dim: a time-free SequenceMLP takes no condition")
            self.net = MLP(dim, out, hidden)

    def forward(self, *, x: torch.Tensor, t: torch.Tensor | None = None, cond: torch.Tensor | None = None):
        """x: (B, L, C), t: (B,) (only with `times=True`), cond: (B, cond_dim) -> logits (B, L, K), from an MLP on the
        flattened x."""
        x = check_sequence_input(x, self.length, self.channels)
        flat = x.reshape(x.shape[0], -1)
        if self.times:
            if t is None:
                raise ValueError("t: required by a time-conditioned SequenceMLP (times=True)")
            y = self.net(x=flat, t=t, cond=cond)
        else:
            if t is not None:
                raise ValueError("t: given to a time-free SequenceMLP (times=False)")
            y = self.net(flat)
        return y.reshape(x.shape[0], self.length, self.letters)


class _DilatedBlock(nn.Module):
    def __init__(self, width: int, dilation: int, embed_dim: int) -> None:
        super().__init__()
        self.norm = nn.GroupNorm(8 if width % 8 == 0 else 1, width)
        self.conv = nn.Conv1d(width, width, 9, padding=4 * dilation, dilation=dilation)
        self.film = nn.Linear(embed_dim, 2 * width)

    def forward(self, h: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
        scale, shift = self.film(e)[..., None].chunk(2, dim=1)
        return h + self.conv(torch.nn.functional.silu(self.norm(h) * (1 + scale) + shift))


def profile_channels(profile: torch.Tensor, length: int, window: int) -> torch.Tensor:
    """profile: (B, M, W) scores in bits of the windows of `window` letters -> (B, M, length) per-letter channels:
    each window's score / PROFILE_SCALE on its letters, 0 on the letters past the last whole window (W * window)."""
    if profile.dim() != 3 or profile.shape[-1] * window > length:
        raise ValueError(f"profile: expected (B, M, W) with W * window <= length {length}, got {tuple(profile.shape)}")
    per_letter = profile.repeat_interleave(window, dim=-1) / PROFILE_SCALE
    return torch.nn.functional.pad(per_letter, (0, length - per_letter.shape[-1]))


class SequenceCNN(nn.Module):
    """`net(x=x, t=t[, cond=c]) -> logits`: x (B, L, C), t (B,) (omitted with `times=False`) -> (B, L, K); cond
    (B,) int64 class labels in [0, classes) (with `classes > 0`) or (B, profile_motifs, L // window) float oracle
    profiles (with `profile_motifs > 0`; see `motifs.profile`). `stacks` stacks of dilations 1, 2, 4, 8 at `width`
    channels (the official DNA denoiser: 4 stacks at 128). A label is embedded and added to the time embedding that
    drives every block's FiLM; a profile enters as `profile_motifs` extra input channels (`profile_channels`), so
    the convolutions see each window's target score where they place its sites."""

    def __init__(
        self,
        letters: int,
        *,
        channels: int | None = None,
        width: int = 128,
        stacks: int = 4,
        times: bool = True,
        classes: int = 0,
        profile_motifs: int = 0,
        window: int = 20,
    ) -> None:
        super().__init__()
        if classes and profile_motifs:
            raise ValueError("classes, profile_motifs: condition on the class or on the profile, not both")
        if window < 1:
            raise ValueError(f"window: expected an int >= 1, got {window}")
        self.letters = letters
        self.channels = letters if channels is None else channels
        self.times, self.classes = times, classes
        self.profile_motifs, self.window = profile_motifs, window
        embed = 64
        self.time = SinusoidalEmbedding(embed, scale=100.0) if times else None
        self.label = nn.Embedding(classes, embed) if classes else None
        self.inp = nn.Conv1d(self.channels + profile_motifs, width, 9, padding=4)
        self.blocks = nn.ModuleList(_DilatedBlock(width, 2**j, embed) for _ in range(stacks) for j in range(4))
        self.out = nn.Conv1d(width, letters, 1)

    def forward(self, *, x: torch.Tensor, t: torch.Tensor | None = None, cond: torch.Tensor | None = None):
        """x: (B, L, C), t: (B,) (only with `times=True`), cond: (B,) int64 labels (with `classes > 0`) or
        (B, profile_motifs, L // window) float profiles (with `profile_motifs > 0`) -> logits (B, L, K)."""
        if not isinstance(x, torch.Tensor) or x.dim() != 3 or x.shape[-1] != self.channels:
            raise ValueError(f"x: expected a (B, L, {self.channels}) float tensor, got {x!r:.60}")
        e = torch.zeros(x.shape[0], 64, device=x.device, dtype=x.dtype)
        if self.time is not None:
            if t is None:
                raise ValueError("t: required by a time-conditioned SequenceCNN (times=True)")
            e = e + self.time(t).to(x.dtype)
        if self.label is not None:
            e = e + self.label(self._labels(cond, x.shape[0]))
        h = x.transpose(1, 2)
        if self.profile_motifs:
            h = torch.cat([h, profile_channels(self._profile(cond, x), x.shape[1], self.window)], 1)
        h = self.inp(h)
        for block in self.blocks:
            h = block(h, e)
        return self.out(h).transpose(1, 2)

    def _labels(self, cond: object, batch: int) -> torch.Tensor:
        """cond: (batch,) int64 labels in [0, classes), else a ValueError."""
        if not isinstance(cond, torch.Tensor) or cond.dtype != torch.long or cond.shape != (batch,):
            raise ValueError(f"cond: expected ({batch},) int64 class labels")
        if bool(((cond < 0) | (cond >= self.classes)).any()):
            raise ValueError(f"cond: expected class labels in [0, {self.classes})")
        return cond

    def _profile(self, cond: object, x: torch.Tensor) -> torch.Tensor:
        """cond: (B, profile_motifs, L // window) finite float -> as x's dtype, else a ValueError naming cond."""
        shape = (x.shape[0], self.profile_motifs, x.shape[1] // self.window)
        if not isinstance(cond, torch.Tensor) or not cond.is_floating_point() or tuple(cond.shape) != shape:
            got = tuple(cond.shape) if isinstance(cond, torch.Tensor) else type(cond).__name__
            raise ValueError(f"cond: expected {shape} float profiles (B, motifs, windows of {self.window}), got {got}")
        if not bool(torch.isfinite(cond).all()):
            raise ValueError("cond: the profiles hold NaN or inf entries")
        return cond.to(x.dtype)
