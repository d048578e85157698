"""Small UNets over 1-D sequences and 2-D images with GroupNorm residual blocks, FiLM time conditioning and an
optional condition vector, shared through the time embedding or projected into every residual block."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils import skip_init

from flowlab.core.nets.embeddings import SinusoidalEmbedding, check_time_shape
from flowlab.core.nets.mlp import _check_positive_int, zero_init
from flowlab.core.validation import check_choice, check_tensor

__all__ = ["UNet1d", "UNet2d"]

_CONV = {1: nn.Conv1d, 2: nn.Conv2d}
_COND_MODES = ("shared", "add", "film")


def _describe(value: object) -> str:
    """A tensor's shape, or the name of what was passed instead (for error messages)."""
    if isinstance(value, torch.Tensor):
        return f"shape {tuple(value.shape)}"
    return "None" if value is None else type(value).__name__


def _norm(channels: int, groups: int) -> nn.GroupNorm:
    return nn.GroupNorm(math.gcd(groups, channels), channels)


class _ResBlock(nn.Module):
    """GroupNorm-SiLU-conv twice; FiLM (1 + scale, shift) from the embedding after the second GroupNorm.

    With `cond_mode` "add" or "film" the block also owns `cond_proj`, a zero-initialised linear map of the condition
    embedding (B, emb_dim) to a shift (B, c_out), or a (scale, shift) pair (B, 2 c_out), added to the time FiLM's.
    """

    def __init__(
        self,
        ndim: int,
        c_in: int,
        c_out: int,
        emb_dim: int,
        groups: int,
        dropout: float,
        cond_mode: Literal["shared", "add", "film"] = "shared",
    ) -> None:
        super().__init__()
        conv = _CONV[ndim]
        self.norm1, self.conv1 = _norm(c_in, groups), conv(c_in, c_out, 3, padding=1)
        self.film = nn.Linear(emb_dim, 2 * c_out)
        self.norm2, self.conv2 = _norm(c_out, groups), conv(c_out, c_out, 3, padding=1)
        self.dropout = nn.Dropout(dropout)
        self.skip = conv(c_in, c_out, 1) if c_in != c_out else nn.Identity()
        self.cond_mode = cond_mode
        if cond_mode != "shared":
            # skip_init draws no random numbers, so the rest of the network is initialised as without it.
            width = 2 * c_out if cond_mode == "film" else c_out
            self.cond_proj = zero_init(skip_init(nn.Linear, emb_dim, width, device=self.film.weight.device))

    def forward(self, x: torch.Tensor, emb: torch.Tensor, cond_emb: torch.Tensor | None = None) -> torch.Tensor:
        """x: (B, c_in, *spatial), emb: (B, emb_dim) and, with a per-block condition, cond_emb: (B, emb_dim) ->
        (B, c_out, *spatial)."""
        h = self.conv1(F.silu(self.norm1(x)))
        scale, shift = self.film(F.silu(emb)).chunk(2, dim=-1)
        if self.cond_mode == "film":
            cond_scale, cond_shift = self.cond_proj(F.silu(cond_emb)).chunk(2, dim=-1)
            scale, shift = scale + cond_scale, shift + cond_shift
        elif self.cond_mode == "add":
            shift = shift + self.cond_proj(F.silu(cond_emb))
        shape = (*scale.shape, *([1] * (h.dim() - 2)))
        h = self.norm2(h) * (1 + scale.reshape(shape)) + shift.reshape(shape)
        h = self.conv2(self.dropout(F.silu(h)))
        return self.skip(x) + h


class _UNet(nn.Module):
    ndim: int

    def __init__(
        self,
        in_channels: int,
        out_channels: int | None = None,
        *,
        channels: Sequence[int] = (32, 64),
        time_dim: int = 128,
        num_res_blocks: int = 1,
        cond_dim: int = 0,
        cond_mode: Literal["shared", "add", "film"] = "shared",
        norm_groups: int = 8,
        dropout: float = 0.0,
        time_scale: float = 1000.0,
        zero_out: bool = True,
    ) -> None:
        super().__init__()
        self.in_channels = _check_positive_int(in_channels, "in_channels")
        self.out_channels = in_channels if out_channels is None else _check_positive_int(out_channels, "out_channels")
        channels = tuple(channels)
        if not channels or not all(isinstance(c, int) and c > 0 for c in channels):
            raise ValueError(f"channels: expected a non-empty sequence of positive integers, got {channels!r}")
        self.channels = channels
        _check_positive_int(num_res_blocks, "num_res_blocks")
        self.cond_dim = _check_positive_int(cond_dim, "cond_dim", allow_zero=True)
        self.cond_mode = check_choice(cond_mode, _COND_MODES, "cond_mode")
        if cond_mode != "shared" and not cond_dim:
            raise ValueError(f"cond_mode: {cond_mode!r} projects cond into every residual block; it needs cond_dim > 0")
        _check_positive_int(norm_groups, "norm_groups")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout: expected a probability in [0, 1), got {dropout!r}")
        conv = _CONV[self.ndim]

        self.time_embed = nn.Sequential(
            SinusoidalEmbedding(time_dim, scale=time_scale),
            nn.Linear(time_dim, time_dim),
            nn.SiLU(),
            nn.Linear(time_dim, time_dim),
        )
        self.cond_embed = nn.Linear(cond_dim, time_dim) if cond_dim and cond_mode == "shared" else None

        def block(c_in: int, c_out: int) -> _ResBlock:
            return _ResBlock(self.ndim, c_in, c_out, time_dim, norm_groups, dropout, cond_mode)

        self.conv_in = conv(in_channels, channels[0], 3, padding=1)
        self.down_blocks, self.downsample = nn.ModuleList(), nn.ModuleList()
        width = channels[0]
        for i, c in enumerate(channels):
            self.down_blocks.append(nn.ModuleList([block(width if j == 0 else c, c) for j in range(num_res_blocks)]))
            width = c
            if i < len(channels) - 1:
                self.downsample.append(conv(c, c, 3, stride=2, padding=1))
        self.mid = nn.ModuleList([block(width, width), block(width, width)])
        self.up_blocks, self.upsample = nn.ModuleList(), nn.ModuleList()
        for i in reversed(range(len(channels))):
            c = channels[i]
            if i < len(channels) - 1:
                self.upsample.append(conv(width, width, 3, padding=1))
            blocks = [block(width + c, c)] + [block(c, c) for _ in range(num_res_blocks - 1)]
            self.up_blocks.append(nn.ModuleList(blocks))
            width = c
        self.norm_out = _norm(width, norm_groups)
        self.conv_out = conv(width, self.out_channels, 3, padding=1)
        if zero_out:
            zero_init(self.conv_out)
        if cond_mode != "shared":
            # Built last, so with the same seed every other parameter equals the unconditioned network's.
            self.cond_embed = nn.Sequential(nn.Linear(cond_dim, time_dim), nn.SiLU(), nn.Linear(time_dim, time_dim))

    def forward(self, *, x: torch.Tensor, t: torch.Tensor, cond: torch.Tensor | None = None) -> torch.Tensor:
        """x: (B, in_channels, *spatial), t: (B,), cond: (B, cond_dim) when `cond_dim > 0` (else None) ->
        (B, out_channels, *spatial)."""
        check_tensor(x, "x", finite=False)
        spatial = "L" if self.ndim == 1 else "H, W"
        if x.dim() != self.ndim + 2 or x.shape[1] != self.in_channels:
            raise ValueError(f"x: expected shape (B, {self.in_channels}, {spatial}), got {tuple(x.shape)}")
        factor = 2 ** (len(self.channels) - 1)
        if any(n % factor for n in x.shape[2:]):
            raise ValueError(f"x: spatial size {tuple(x.shape[2:])} must be divisible by {factor} (2^(levels-1))")
        batch = x.shape[0]
        check_time_shape(t, batch, "t")
        emb, cond_emb = self.time_embed(t.to(x.dtype)), None
        if self.cond_dim:
            if not isinstance(cond, torch.Tensor) or tuple(cond.shape) != (batch, self.cond_dim):
                raise ValueError(f"cond: expected shape ({batch}, {self.cond_dim}), got {_describe(cond)}")
            if self.cond_mode == "shared":
                emb = emb + self.cond_embed(cond.to(x.dtype))
            else:
                cond_emb = self.cond_embed(cond.to(x.dtype))
        elif cond is not None:
            raise ValueError(f"cond: expected None (the network was built with cond_dim=0), got {_describe(cond)}")

        h = self.conv_in(x)
        skips = []
        for i, blocks in enumerate(self.down_blocks):
            for blk in blocks:
                h = blk(h, emb, cond_emb)
            skips.append(h)
            if i < len(self.downsample):
                h = self.downsample[i](h)
        for blk in self.mid:
            h = blk(h, emb, cond_emb)
        for j, blocks in enumerate(self.up_blocks):
            if j > 0:
                h = self.upsample[j - 1](F.interpolate(h, scale_factor=2.0, mode="nearest"))
            h = torch.cat([h, skips.pop()], dim=1)
            for blk in blocks:
                h = blk(h, emb, cond_emb)
        return self.conv_out(F.silu(self.norm_out(h)))


class UNet1d(_UNet):
    """UNet over sequences: `net(x=x, t=t[, cond=c])` with x: (B, in_channels, L) -> (B, out_channels, L).

    One level per entry of `channels` (L divisible by 2^(levels-1)); each level has `num_res_blocks` residual
    blocks (GroupNorm, SiLU, conv, FiLM from the sinusoidal time embedding), and two more in the middle; the output
    convolution starts at zero unless `zero_out=False`.

    With `cond_dim > 0`, every call takes `cond: (B, cond_dim)`, which `cond_mode` routes:

    - `"shared"`: a linear embedding of cond is added to the time embedding, so every block sees it through its
      time FiLM (one shared projection; diffusers' `class_embed_type="projection"`);
    - `"add"`: an MLP (Linear, SiLU, Linear) embeds cond to `time_dim`, and every residual block has its own
      linear projection of it, added as a per-channel shift beside the time FiLM (the official Patronus UNet's
      `h + W_t SiLU(t_emb) + W_s SiLU(s_emb)`);
    - `"film"`: as `"add"`, but each block's projection gives a (scale, shift) pair added to the time FiLM's.

    The per-block projections (`cond_proj` of each block) start at zero, so a fresh `"add"`/`"film"` network
    ignores cond and, built from the same seed, equals the network built with `cond_dim=0`.
    """

    ndim = 1


class UNet2d(_UNet):
    """UNet over images: `net(x=x, t=t[, cond=c])` with x: (B, in_channels, H, W) -> (B, out_channels, H, W).

    Same structure and options as `UNet1d` (H and W divisible by 2^(levels-1)).
    """

    ndim = 2
