"""Diffusion-transformer pieces (Peebles & Xie 2023): adaLN-Zero blocks with a pluggable attention and MLP, and a tiny
patch DiT with optional class labels (a null label and label dropout for classifier-free guidance).

A block MLP that subclasses `ContextMLP` reads the block's `TokenContext` (labels, token layout) and may return
auxiliary losses and statistics (e.g. a mixture of experts and its routing); `DiT(..., return_aux=True)` gathers them
into a `DiTOutput`.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from flowlab.core.nets.attention import AttentionFn, TokenLayout, sdpa_attention
from flowlab.core.nets.embeddings import SinusoidalEmbedding, check_time_shape
from flowlab.core.nets.labels import check_labels, drop_labels
from flowlab.core.nets.mlp import _check_positive_int, zero_init
from flowlab.core.nets.wrappers import ClassifierFreeGuidance
from flowlab.core.validation import check_tensor

__all__ = [
    "BlockOutput",
    "ContextMLP",
    "DiT",
    "DiTBlock",
    "DiTOutput",
    "MLPFactory",
    "MLPOutput",
    "TokenContext",
    "dense_mlp",
]

#: `mlp_factory(block_index, width, hidden) -> nn.Module`: the MLP of block `block_index` (from 0), mapping
#: (B, N, width) -> (B, N, width); `hidden` is the dense MLP's hidden width, int(width * mlp_ratio).
MLPFactory = Callable[[int, int, int], nn.Module]


@dataclass(frozen=True)
class TokenContext:
    """What a block's attention and MLP may read besides the tokens: the `layout` of the N tokens (None: a plain
    token set), the class `labels` (B,) int64 after label dropout (None: an unlabelled network) and the
    `null_label` index among them."""

    layout: TokenLayout | None = None
    labels: torch.Tensor | None = None
    null_label: int | None = None


@dataclass(frozen=True)
class MLPOutput:
    """What a `ContextMLP` returns: `out` (B, N, width), named auxiliary losses (scalars the caller adds to its
    training loss) and named statistics (e.g. tokens per expert; any shape)."""

    out: torch.Tensor
    aux_losses: dict[str, torch.Tensor] = field(default_factory=dict)
    stats: dict[str, torch.Tensor] = field(default_factory=dict)


@dataclass(frozen=True)
class BlockOutput:
    """`DiTBlock(..., return_aux=True)`: the tokens `x` (B, N, dim) and its MLP's auxiliary losses and statistics."""

    x: torch.Tensor
    aux_losses: dict[str, torch.Tensor]
    stats: dict[str, torch.Tensor]


@dataclass(frozen=True)
class DiTOutput:
    """`DiT(..., return_aux=True)`: the `sample` (the plain call's output) and every block MLP's auxiliary losses
    and statistics, named `blocks.<i>.<name>`."""

    sample: torch.Tensor
    aux_losses: dict[str, torch.Tensor]
    stats: dict[str, torch.Tensor]

    @property
    def aux_loss(self) -> torch.Tensor:
        """The sum of the auxiliary losses, a scalar (0 without any)."""
        return sum(self.aux_losses.values(), self.sample.new_zeros(()))


class ContextMLP(nn.Module, abc.ABC):
    """Base of a block MLP that reads the block's `TokenContext` and returns an `MLPOutput`, e.g. a mixture of
    experts routing on class labels and reporting its routing: `forward(x: (B, N, width), *, context)`. A
    `DiTBlock` calls any other MLP module as `mlp(x) -> (B, N, width)`."""

    @abc.abstractmethod
    def forward(self, x: torch.Tensor, *, context: TokenContext) -> MLPOutput:
        """x: (B, N, width) -> `MLPOutput` with out: (B, N, width)."""


def dense_mlp(width: int, hidden: int) -> nn.Sequential:
    """The default block MLP: Linear(width, hidden) -> GELU (tanh) -> Linear(hidden, width), (B, N, width) ->
    (B, N, width)."""
    return nn.Sequential(nn.Linear(width, hidden), nn.GELU(approximate="tanh"), nn.Linear(hidden, width))


def _modulate(x: torch.Tensor, shift: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return x * (1 + scale[:, None]) + shift[:, None]


class DiTBlock(nn.Module):
    """Pre-norm transformer block whose LayerNorms are modulated by a condition c (adaLN-Zero).

    x: (B, N, dim), c: (B, dim) -> (B, N, dim). The modulation layer starts at zero, so every gate is 0 and
    the block is the identity at initialisation. `mlp` replaces the default `dense_mlp(dim, int(mlp_ratio * dim))`
    with any module mapping (B, N, dim) -> (B, N, dim), or a `ContextMLP` (e.g. a mixture of experts).
    `attention` (an `AttentionFn`, default `sdpa_attention`) maps the heads q, k, v: (B, heads, N, dim / heads) to
    the output of the same shape. `attn_mask` (bool, True = attend, or additive float) broadcastable to
    (B, heads, N, N) masks padding or adds an edge bias; it is handed to the attention function.
    """

    def __init__(
        self,
        dim: int,
        heads: int,
        *,
        mlp_ratio: float = 4.0,
        mlp: nn.Module | None = None,
        attention: AttentionFn = sdpa_attention,
    ) -> None:
        super().__init__()
        _check_positive_int(dim, "dim")
        _check_positive_int(heads, "heads")
        if dim % heads:
            raise ValueError(f"heads: must divide dim={dim}, got {heads}")
        if not mlp_ratio > 0:
            raise ValueError(f"mlp_ratio: expected a positive number, got {mlp_ratio!r}")
        if not callable(attention):
            raise ValueError(f"attention: expected a callable attention(q, k, v, mask=, layout=), got {attention!r}")
        self.dim, self.heads = dim, heads
        self.attention = attention
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.mlp = dense_mlp(dim, int(dim * mlp_ratio)) if mlp is None else mlp
        self.modulation = zero_init(nn.Linear(dim, 6 * dim))

    def forward(
        self,
        x: torch.Tensor,
        c: torch.Tensor,
        *,
        attn_mask: torch.Tensor | None = None,
        context: TokenContext | None = None,
        return_aux: bool = False,
    ) -> torch.Tensor | BlockOutput:
        """x: (B, N, dim), c: (B, dim) -> (B, N, dim): gated attention and MLP residuals on adaLN-modulated norms.

        `context` (default: no layout, no labels) reaches the attention (its layout) and a `ContextMLP`. With
        `return_aux` a `BlockOutput` also carries the MLP's auxiliary losses and statistics."""
        check_tensor(x, "x", finite=False)
        if x.dim() != 3 or x.shape[-1] != self.dim:
            raise ValueError(f"x: expected shape (B, N, {self.dim}), got {tuple(x.shape)}")
        if not isinstance(c, torch.Tensor) or tuple(c.shape) != (x.shape[0], self.dim):
            shape = tuple(c.shape) if isinstance(c, torch.Tensor) else type(c).__name__
            raise ValueError(f"c: expected shape ({x.shape[0]}, {self.dim}), got {shape}")
        context = TokenContext() if context is None else context
        if context.layout is not None and context.layout.num_tokens != x.shape[1]:
            raise ValueError(
                f"context: its layout {context.layout} holds {context.layout.num_tokens} tokens, x has {x.shape[1]}"
            )
        shift1, scale1, gate1, shift2, scale2, gate2 = self.modulation(F.silu(c)).chunk(6, dim=-1)
        x = x + gate1[:, None] * self._attention(_modulate(self.norm1(x), shift1, scale1), attn_mask, context.layout)
        h = _modulate(self.norm2(x), shift2, scale2)
        mlp = self.mlp(h, context=context) if isinstance(self.mlp, ContextMLP) else MLPOutput(self.mlp(h))
        x = x + gate2[:, None] * mlp.out
        return BlockOutput(x, mlp.aux_losses, mlp.stats) if return_aux else x

    def _attention(self, x: torch.Tensor, attn_mask: torch.Tensor | None, layout: TokenLayout | None) -> torch.Tensor:
        b, n, _ = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, self.dim // self.heads).permute(2, 0, 3, 1, 4)
        out = self.attention(q, k, v, mask=attn_mask, layout=layout)
        if not isinstance(out, torch.Tensor) or out.shape != q.shape:
            got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            raise ValueError(f"attention: expected an output of the heads' shape {tuple(q.shape)}, got {got}")
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
    """A tiny patch DiT: `net(x=x, t=t[, cond=c][, y=y])` with x: (B, in_channels, S, S) -> (B, out_channels, S, S).

    Patchify (patch x patch, stride patch) -> fixed 2-D sin-cos positions -> `depth` adaLN-Zero blocks
    conditioned on an MLP embedding of t (plus a linear embedding of cond: (B, cond_dim), plus a learned embedding
    of class labels y: (B,) when `num_classes` > 0) -> adaLN final layer -> unpatchify.
    The final layer starts at zero, so the network outputs 0 at initialisation.

    Labels: `num_classes + 1` embedding rows, row `num_classes` the null label of classifier-free guidance (used
    when y is None; `guided(scale)` is the guided field). In training mode each label is replaced by the null label
    with probability `class_dropout`, drawn from the `generator=` the call must then pass.
    `mlp_factory(block_index, dim, hidden)` builds each block's MLP (default `dense_mlp`, hidden =
    int(mlp_ratio * dim)); `attention` is every block's attention function. `return_aux=True` returns a
    `DiTOutput` with the `ContextMLP`s' auxiliary losses and statistics.
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
        num_classes: int = 0,
        class_dropout: float = 0.0,
        mlp_factory: MLPFactory | None = None,
        attention: AttentionFn = sdpa_attention,
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
        if not mlp_ratio > 0:
            raise ValueError(f"mlp_ratio: expected a positive number, got {mlp_ratio!r}")
        self.num_classes = _check_positive_int(num_classes, "num_classes", allow_zero=True)
        if not (isinstance(class_dropout, (int, float)) and 0.0 <= class_dropout < 1.0):
            raise ValueError(f"class_dropout: expected a probability in [0, 1), got {class_dropout!r}")
        if class_dropout and not num_classes:
            raise ValueError("class_dropout: needs class labels (num_classes > 0)")
        if mlp_factory is not None and not callable(mlp_factory):
            raise ValueError(
                f"mlp_factory: expected a callable (block_index, width, hidden) -> nn.Module, got {mlp_factory!r}"
            )
        self.class_dropout = float(class_dropout)
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
        self.label_embed = nn.Embedding(num_classes + 1, dim) if num_classes else None
        mlps = [self._block_mlp(mlp_factory, i, dim, mlp_ratio) for i in range(depth)]
        self.blocks = nn.ModuleList(
            [DiTBlock(dim, heads, mlp_ratio=mlp_ratio, mlp=mlp, attention=attention) for mlp in mlps]
        )
        self.norm_out = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.modulation_out = zero_init(nn.Linear(dim, 2 * dim))
        self.out = zero_init(nn.Linear(dim, patch * patch * self.out_channels))

    @staticmethod
    def _block_mlp(factory: MLPFactory | None, index: int, dim: int, mlp_ratio: float) -> nn.Module | None:
        if factory is None:
            return None
        mlp = factory(index, dim, int(dim * mlp_ratio))
        if not isinstance(mlp, nn.Module):
            raise ValueError(f"mlp_factory: expected an nn.Module for block {index}, got {type(mlp).__name__}")
        return mlp

    @property
    def null_label(self) -> int:
        """The null label's index, `num_classes`."""
        if not self.num_classes:
            raise ValueError("null_label: this network has no class labels (num_classes=0)")
        return self.num_classes

    def guided(self, scale: float) -> ClassifierFreeGuidance:
        """The classifier-free-guided field `u_null + scale (u_cond - u_null)` of this labelled network, both
        branches in one batched call: `net.guided(1.5)(x=x, t=t, y=y)`."""
        return ClassifierFreeGuidance(self, scale=scale, null_cond={"y": torch.tensor(self.null_label)})

    def forward(
        self,
        *,
        x: torch.Tensor,
        t: torch.Tensor,
        cond: torch.Tensor | None = None,
        y: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
        return_aux: bool = False,
    ) -> torch.Tensor | DiTOutput:
        """x: (B, in_channels, S, S), t: (B,), cond: (B, cond_dim) or None, y: (B,) int64 labels in [0, num_classes]
        or None (the null label) -> the output (B, out_channels, S, S), or with `return_aux` a `DiTOutput`.

        `generator` draws the label dropout (needed in training mode when class_dropout > 0)."""
        h, layout = self._tokens(x)
        c, labels = self._condition(x, t, cond, y, generator)
        context = TokenContext(
            layout=layout, labels=labels, null_label=self.num_classes if labels is not None else None
        )
        aux_losses: dict[str, torch.Tensor] = {}
        stats: dict[str, torch.Tensor] = {}
        for i, blk in enumerate(self.blocks):
            block = blk(h, c, context=context, return_aux=True)
            h = block.x
            aux_losses.update({f"blocks.{i}.{name}": v for name, v in block.aux_losses.items()})
            stats.update({f"blocks.{i}.{name}": v for name, v in block.stats.items()})
        shift, scale = self.modulation_out(F.silu(c)).chunk(2, dim=-1)
        sample = self._pixels(self.out(_modulate(self.norm_out(h), shift, scale)), layout)
        return DiTOutput(sample, aux_losses, stats) if return_aux else sample

    def _tokens(self, x: torch.Tensor) -> tuple[torch.Tensor, TokenLayout]:
        """x: (B, C, S, S) -> tokens (B, G*G, dim) with positions, and their layout (one frame of G x G)."""
        check_tensor(x, "x", finite=False)
        size = self.image_size
        if tuple(x.shape[1:]) != (self.in_channels, size, size):
            raise ValueError(f"x: expected shape (B, {self.in_channels}, {size}, {size}), got {tuple(x.shape)}")
        h = self.patchify(x).flatten(2).transpose(1, 2) + self.pos.to(x.dtype)
        return h, TokenLayout(1, self.grid, self.grid)

    def _pixels(self, tokens: torch.Tensor, layout: TokenLayout) -> torch.Tensor:
        """tokens (B, G*G, patch*patch*out_channels) -> (B, out_channels, S, S)."""
        return _unpatchify(tokens, self.patch, self.out_channels)

    def _condition(
        self,
        x: torch.Tensor,
        t: torch.Tensor,
        cond: torch.Tensor | None,
        y: torch.Tensor | None,
        generator: torch.Generator | None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The blocks' condition c: (B, dim) and the labels (B,) after dropout (None without labels)."""
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
        if self.label_embed is None:
            if y is not None:
                raise ValueError("y: given to a network without class labels (num_classes=0)")
            return c, None
        if y is None:
            y = torch.full((b,), self.num_classes, dtype=torch.long, device=x.device)
        check_labels(y, b, self.num_classes, allow_null=True)
        if self.training and self.class_dropout:
            if generator is None:
                raise ValueError(
                    f"generator: class_dropout={self.class_dropout:g} in training mode draws the dropped labels; "
                    "pass generator="
                )
            y = drop_labels(y, self.class_dropout, null_label=self.num_classes, generator=generator)
        return c + self.label_embed(y).to(x.dtype), y
