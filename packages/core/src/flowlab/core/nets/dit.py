"""Diffusion-transformer pieces (Peebles & Xie 2023): adaLN-Zero blocks and a tiny patch DiT."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from flowlab.core.nets.embeddings import SinusoidalEmbedding, check_time_shape
from flowlab.core.nets.mlp import _check_positive_int, zero_init
from flowlab.core.validation import check_tensor

__all__ = ["DiT", "DiTBlock"]


def _modulate(x: torch.Tensor, shift: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return x * (1 + scale[:, None]) + shift[:, None]


class DiTBlock(nn.Module):
    """Pre-norm transformer block whose LayerNorms are modulated by a condition c (adaLN-Zero).

    x: (B, N, dim), c: (B, dim) -> (B, N, dim). The modulation layer starts at zero, so every gate is 0 and
    the block is the identity at initialisation. `mlp` replaces the default GELU MLP (dim -> mlp_ratio*dim ->
    dim) with any module mapping (B, N, dim) -> (B, N, dim), e.g. a mixture of experts. `attn_mask` (bool,
    True = attend, or additive float) broadcastable to (B, heads, N, N) masks padding or adds an edge bias.
    """

    def __init__(self, dim: int, heads: int, *, mlp_ratio: float = 4.0, mlp: nn.Module | None = None) -> None:
        super().__init__()
        _check_positive_int(dim, "dim")
        _check_positive_int(heads, "heads")
        if dim % heads:
            raise ValueError(f"heads: must divide dim={dim}, got {heads}")
        if not mlp_ratio > 0:
            raise ValueError(f"mlp_ratio: expected a positive number, got {mlp_ratio!r}")
        self.dim, self.heads = dim, heads
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        if mlp is None:
            width = int(dim * mlp_ratio)
            mlp = nn.Sequential(nn.Linear(dim, width), nn.GELU(approximate="tanh"), nn.Linear(width, dim))
        self.mlp = mlp
        self.modulation = zero_init(nn.Linear(dim, 6 * dim))

    def forward(self, x: torch.Tensor, c: torch.Tensor, *, attn_mask: torch.Tensor | None = None) -> torch.Tensor:
        """x: (B, N, dim), c: (B, dim) -> (B, N, dim): gated attention and MLP residuals on adaLN-modulated norms."""
        check_tensor(x, "x", finite=False)
        if x.dim() != 3 or x.shape[-1] != self.dim:
            raise ValueError(f"x: expected shape (B, N, {self.dim}), got {tuple(x.shape)}")
        if not isinstance(c, torch.Tensor) or tuple(c.shape) != (x.shape[0], self.dim):
            shape = tuple(c.shape) if isinstance(c, torch.Tensor) else type(c).__name__
            raise ValueError(f"c: expected shape ({x.shape[0]}, {self.dim}), got {shape}")
        shift1, scale1, gate1, shift2, scale2, gate2 = self.modulation(F.silu(c)).chunk(6, dim=-1)
        x = x + gate1[:, None] * self._attention(_modulate(self.norm1(x), shift1, scale1), attn_mask)
        return x + gate2[:, None] * self.mlp(_modulate(self.norm2(x), shift2, scale2))

    def _attention(self, x: torch.Tensor, attn_mask: torch.Tensor | None) -> torch.Tensor:
        b, n, _ = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, self.dim // self.heads).permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
        return self.proj(out.transpose(1, 2).reshape(b, n, self.dim))


def _sincos_2d(grid: int, dim: int) -> torch.Tensor:
    """Fixed 2-D sine-cosine position table (grid*grid, dim): half the channels encode rows, half columns."""
    quarter = dim // 4
    freqs = torch.exp(-math.log(10_000.0) * torch.arange(quarter, dtype=torch.float64) / quarter)
    pos = torch.arange(grid, dtype=torch.float64)
    rows, cols = torch.meshgrid(pos, pos, indexing="ij")
    parts = []
    for p in (rows.reshape(-1), cols.reshape(-1)):
        angles = p[:, None] * freqs
        parts += [angles.sin(), angles.cos()]
    return torch.cat(parts, dim=-1).float()


def _unpatchify(tokens: torch.Tensor, patch: int, channels: int) -> torch.Tensor:
    """Tokens (B, G*G, patch*patch*C), patches row-major, pixels as (row, col, channel) -> (B, C, S, S)."""
    b, n, _ = tokens.shape
    g = math.isqrt(n)
    tokens = tokens.reshape(b, g, g, patch, patch, channels)
    return tokens.permute(0, 5, 1, 3, 2, 4).reshape(b, channels, g * patch, g * patch)


class DiT(nn.Module):
    """A tiny patch DiT: `net(x=x, t=t[, cond=c])` with x: (B, in_channels, S, S) -> (B, out_channels, S, S).

    Patchify (patch x patch, stride patch) -> fixed 2-D sin-cos positions -> `depth` adaLN-Zero blocks
    conditioned on an MLP embedding of t (plus a linear embedding of cond: (B, cond_dim)) -> adaLN final layer
    -> unpatchify.
    The final layer starts at zero, so the network outputs 0 at initialisation.
    """

    def __init__(
        self,
        image_size: int,
        patch: int,
        in_channels: int,
        dim: int,
        depth: int,
        heads: int,
        *,
        out_channels: int | None = None,
        mlp_ratio: float = 4.0,
        cond_dim: int = 0,
        time_scale: float = 1000.0,
    ) -> None:
        super().__init__()
        _check_positive_int(image_size, "image_size")
        _check_positive_int(patch, "patch")
        if image_size % patch:
            raise ValueError(f"patch: must divide image_size={image_size}, got {patch}")
        _check_positive_int(dim, "dim")
        if dim % 4:
            raise ValueError(f"dim: must be a multiple of 4 (2-D sin-cos positions), got {dim}")
        _check_positive_int(depth, "depth")
        self.image_size, self.patch = image_size, patch
        self.in_channels = _check_positive_int(in_channels, "in_channels")
        self.out_channels = in_channels if out_channels is None else _check_positive_int(out_channels, "out_channels")
        self.cond_dim = _check_positive_int(cond_dim, "cond_dim", allow_zero=True)
        self.grid = image_size // patch
        self.patchify = nn.Conv2d(in_channels, dim, patch, stride=patch)
        self.register_buffer("pos", _sincos_2d(self.grid, dim), persistent=False)
        self.time_embed = nn.Sequential(
            SinusoidalEmbedding(dim, scale=time_scale), nn.Linear(dim, dim), nn.SiLU(), nn.Linear(dim, dim)
        )
        self.cond_embed = nn.Linear(cond_dim, dim) if cond_dim else None
        self.blocks = nn.ModuleList([DiTBlock(dim, heads, mlp_ratio=mlp_ratio) for _ in range(depth)])
        self.norm_out = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.modulation_out = zero_init(nn.Linear(dim, 2 * dim))
        self.out = zero_init(nn.Linear(dim, patch * patch * self.out_channels))

    def forward(self, *, x: torch.Tensor, t: torch.Tensor, cond: torch.Tensor | None = None) -> torch.Tensor:
        """x: (B, in_channels, S, S), t: (B,), cond: (B, cond_dim) or None -> the output (B, out_channels, S, S)."""
        check_tensor(x, "x", finite=False)
        size = self.image_size
        if tuple(x.shape[1:]) != (self.in_channels, size, size):
            raise ValueError(f"x: expected shape (B, {self.in_channels}, {size}, {size}), got {tuple(x.shape)}")
        b = x.shape[0]
        check_time_shape(t, b, "t")
        c = self.time_embed(t.to(x.dtype))
        if self.cond_embed is not None:
            if not isinstance(cond, torch.Tensor) or tuple(cond.shape) != (b, self.cond_dim):
                shape = tuple(cond.shape) if isinstance(cond, torch.Tensor) else type(cond).__name__
                raise ValueError(f"cond: expected shape ({b}, {self.cond_dim}), got {shape}")
            c = c + self.cond_embed(cond.to(x.dtype))
        elif cond is not None:
            raise ValueError("cond: given to an unconditional network (cond_dim=0)")
        h = self.patchify(x).flatten(2).transpose(1, 2) + self.pos.to(x.dtype)
        for blk in self.blocks:
            h = blk(h, c)
        shift, scale = self.modulation_out(F.silu(c)).chunk(2, dim=-1)
        return _unpatchify(self.out(_modulate(self.norm_out(h), shift, scale)), self.patch, self.out_channels)
