"""A frame-aware patch DiT for video: every frame patchified alike, fixed spatial and temporal sin-cos positions,
tokens laid out frames-major so that the blocks' attention functions see the frames (`TokenLayout`)."""

from __future__ import annotations

import math

import torch

from flowlab.core.nets.attention import TokenLayout
from flowlab.core.nets.dit import DiT, _unpatchify
from flowlab.core.nets.mlp import _check_positive_int
from flowlab.core.validation import check_tensor

__all__ = ["VideoDiT"]


def _sincos_1d(length: int, dim: int) -> torch.Tensor:
    """Fixed 1-D sine-cosine position table (length, dim): dim / 2 sines, then dim / 2 cosines."""
    half = dim // 2
    freqs = torch.exp(-math.log(10_000.0) * torch.arange(half, dtype=torch.float64) / half)
    angles = torch.arange(length, dtype=torch.float64)[:, None] * freqs
    return torch.cat([angles.sin(), angles.cos()], dim=-1).float()


class VideoDiT(DiT):
    """A patch DiT over `frames` frames: `net(x=x, t=t[, cond=][, y=])` with x: (B, frames, in_channels, S, S) ->
    (B, frames, out_channels, S, S).

    Each frame is patchified by the same convolution and gets the 2-D sin-cos position of its patches plus a 1-D
    sin-cos embedding of its frame index, so equal patches of different frames differ. The N = frames * G * G tokens
    are frames-major (`TokenLayout(frames, G, G)`), and every block's attention function receives that layout, e.g.
    to attend within frames or across them. Everything else (time, cond, class labels and their dropout, MLP
    factory, auxiliary outputs) is `DiT`'s, with the same keyword arguments.
    """

    def __init__(
        self, frames: int, image_size: int, patch: int, in_channels: int, dim: int, depth: int, heads: int, **kwargs
    ) -> None:
        super().__init__(image_size, patch, in_channels, dim, depth, heads, **kwargs)
        self.frames = _check_positive_int(frames, "frames")
        self.register_buffer("frame_pos", _sincos_1d(frames, dim), persistent=False)

    def _tokens(self, x: torch.Tensor) -> tuple[torch.Tensor, TokenLayout]:
        """x: (B, F, C, S, S) -> tokens (B, F*G*G, dim), frames-major, and their layout."""
        check_tensor(x, "x", finite=False)
        size = self.image_size
        if tuple(x.shape[1:]) != (self.frames, self.in_channels, size, size):
            raise ValueError(
                f"x: expected shape (B, {self.frames}, {self.in_channels}, {size}, {size}), got {tuple(x.shape)}"
            )
        b = x.shape[0]
        h = self.patchify(x.flatten(0, 1)).flatten(2).transpose(1, 2) + self.pos.to(x.dtype)  # (B*F, G*G, dim)
        h = h.unflatten(0, (b, self.frames)) + self.frame_pos.to(x.dtype)[:, None]
        return h.flatten(1, 2), TokenLayout(self.frames, self.grid, self.grid)

    def _pixels(self, tokens: torch.Tensor, layout: TokenLayout) -> torch.Tensor:
        """tokens (B, F*G*G, patch*patch*out_channels) -> (B, F, out_channels, S, S)."""
        frames = tokens.unflatten(1, (layout.frames, layout.tokens_per_frame)).flatten(0, 1)
        return _unpatchify(frames, self.patch, self.out_channels).unflatten(0, (tokens.shape[0], layout.frames))
