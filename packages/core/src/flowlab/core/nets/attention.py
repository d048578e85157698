"""Attention over token sequences: where each token sits (`TokenLayout`), the attention function a `DiTBlock` calls
(`AttentionFn`) and its default, PyTorch's fused scaled dot-product attention (`sdpa_attention`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch
import torch.nn.functional as F

from flowlab.core.nets.mlp import _check_positive_int

__all__ = ["AttentionFn", "TokenLayout", "sdpa_attention"]


@dataclass(frozen=True)
class TokenLayout:
    """Where each of the N = frames * height * width tokens of a sequence sits: frames-major, then patch rows, then
    patch columns (token n = (f * height + i) * width + j). An image is one frame."""

    frames: int
    height: int
    width: int

    def __post_init__(self) -> None:
        for name in ("frames", "height", "width"):
            _check_positive_int(getattr(self, name), name)

    @property
    def tokens_per_frame(self) -> int:
        """height * width, the tokens of one frame."""
        return self.height * self.width

    @property
    def num_tokens(self) -> int:
        """N = frames * height * width."""
        return self.frames * self.tokens_per_frame

    def frame_index(self, *, device: torch.device | str | None = None) -> torch.Tensor:
        """(N,) int64: the frame of every token, e.g. to build a frame-local mask `f[:, None] == f[None, :]`."""
        return torch.arange(self.frames, device=device).repeat_interleave(self.tokens_per_frame)


class AttentionFn(Protocol):
    """What a `DiTBlock` calls for attention: `attention(q, k, v, mask=, layout=) -> out`.

    q, k, v, out: (B, H, N, Dh), the heads of N tokens. `mask` is None or broadcastable to (B, H, N, N), bool (True =
    attend) or an additive float bias. `layout` says where the tokens sit (frames, patch rows, columns), or is None
    for a plain token set. A distributed or sparse attention reads the frames from it.
    """

    def __call__(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        *,
        mask: torch.Tensor | None,
        layout: TokenLayout | None,
    ) -> torch.Tensor:
        """q, k, v: (B, H, N, Dh) -> (B, H, N, Dh)."""


def sdpa_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    mask: torch.Tensor | None = None,
    layout: TokenLayout | None = None,
) -> torch.Tensor:
    """Dense softmax attention through `torch.nn.functional.scaled_dot_product_attention` (the default of
    `DiTBlock`): q, k, v: (B, H, N, Dh) -> (B, H, N, Dh). The layout is not needed: every token attends to every
    token `mask` allows."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
