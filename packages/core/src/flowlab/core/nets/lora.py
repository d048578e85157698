"""Routed low-rank adapters: P parallel LoRA branches around one frozen module, one chosen per sample.

    lora = RoutedLoRA(block, num_adapters=4, rank=4)       # block: a conv block, nn.Conv2d or nn.Linear
    lora.set_route(idx)                                    # idx: (B,) adapter of each sample, or None (off)
    y = lora(x)                                            # block(x) + alpha / rank * up[idx](down[idx](x))

`attach_routed_lora(model, names)` swaps the named submodules of `model` for `RoutedLoRA` wrappers in place. The
up-projections start at zero, so a fresh adapter leaves the module's output unchanged, and with the route set to
None the wrapper returns exactly the wrapped module's output. Per-sample routing gathers each sample's adapter
weights (a grouped convolution / a batched matmul), never loops over samples.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["RoutedLoRA", "attach_routed_lora"]


def _channels(base: nn.Module, kind: str) -> tuple[int, int]:
    """(in, out) channels of the module an adapter wraps: Linear features, a module's in_channels / out_channels
    attributes (nn.Conv2d, diffusers' ResnetBlock2D), else the first and last nn.Conv2d inside it."""
    if kind == "linear":
        if not isinstance(base, nn.Linear):
            raise ValueError(f"base: kind 'linear' wraps an nn.Linear, got {type(base).__name__}")
        return base.in_features, base.out_features
    c_in, c_out = getattr(base, "in_channels", None), getattr(base, "out_channels", None)
    if isinstance(c_in, int) and isinstance(c_out, int):
        return c_in, c_out
    convs = [m for m in base.modules() if isinstance(m, nn.Conv2d)]
    if not convs:
        raise ValueError(
            f"base: kind 'conv' needs a module with channels or a Conv2d inside, got {type(base).__name__}"
        )
    return convs[0].in_channels, convs[-1].out_channels


class RoutedLoRA(nn.Module):
    """`base` (frozen by the caller) plus one of `num_adapters` low-rank branches per sample.

    kind "conv": x (B, C_in, H, W) -> base(x) + s * up(down(x)), down a `kernel_size` conv C_in -> rank (the
    base's stride when it is an nn.Conv2d), up a 1x1 conv rank -> C_out; kind "linear": x (B, ..., C_in) -> base(x)
    + s * x down^T up^T. s = alpha / rank. Extra positional and keyword arguments go to `base` (e.g. a
    ResnetBlock2D's `temb`)."""

    def __init__(
        self,
        base: nn.Module,
        *,
        num_adapters: int = 4,
        rank: int = 4,
        alpha: float = 1.0,
        kind: Literal["conv", "linear"] = "conv",
        kernel_size: int = 3,
    ) -> None:
        super().__init__()
        if kind not in ("conv", "linear"):
            raise ValueError(f"kind: expected 'conv' or 'linear', got {kind!r}")
        for name, value in (("num_adapters", num_adapters), ("rank", rank), ("kernel_size", kernel_size)):
            if not (isinstance(value, int) and value >= 1):
                raise ValueError(f"{name}: expected a positive int, got {value!r}")
        if kind == "conv" and kernel_size % 2 == 0:
            raise ValueError(f"kernel_size: expected an odd size, got {kernel_size}")
        c_in, c_out = _channels(base, kind)
        self.base, self.kind, self.scale = base, kind, float(alpha) / rank
        self.num_adapters, self.rank = num_adapters, rank
        self.stride = base.stride if isinstance(base, nn.Conv2d) else 1
        k = kernel_size if kind == "conv" else 1
        down = torch.empty(num_adapters, rank, c_in, k, k)
        for d in down:
            nn.init.kaiming_uniform_(d, a=5**0.5)
        self.down = nn.Parameter(down if kind == "conv" else down[..., 0, 0])
        self.up = nn.Parameter(torch.zeros(num_adapters, c_out, rank))
        self.route: torch.Tensor | None = None

    def set_route(self, idx: torch.Tensor | None) -> None:
        """idx: (B,) int adapter of each sample in [0, num_adapters), or None to switch the adapters off."""
        if idx is not None:
            if not isinstance(idx, torch.Tensor) or idx.dim() != 1 or idx.dtype.is_floating_point:
                raise ValueError("idx: expected a (B,) integer tensor of adapter indices")
            if idx.numel() and not bool(((idx >= 0) & (idx < self.num_adapters)).all()):
                raise ValueError(f"idx: expected adapter indices in [0, {self.num_adapters})")
        self.route = idx

    def delta(self, x: torch.Tensor) -> torch.Tensor:
        """The routed branch alone: (B, C_in, H, W) -> (B, C_out, H', W') or (B, ..., C_in) -> (B, ..., C_out)."""
        idx = self.route.to(x.device)
        if idx.shape[0] != x.shape[0]:
            raise ValueError(f"x: the route holds {idx.shape[0]} samples, the batch {x.shape[0]}")
        down, up = self.down[idx], self.up[idx]  # (B, r, C_in[, k, k]), (B, C_out, r)
        if self.kind == "linear":
            h = torch.einsum("b...i,bri->b...r", x, down)
            return torch.einsum("b...r,bor->b...o", h, up)
        b, c, hgt, wid = x.shape
        k = down.shape[-1]
        h = F.conv2d(x.reshape(1, b * c, hgt, wid), down.reshape(b * self.rank, c, k, k), stride=self.stride,
                     padding=k // 2, groups=b)  # fmt: skip
        h = h.reshape(b, self.rank, *h.shape[-2:])
        return torch.einsum("brhw,bor->bohw", h, up)

    def forward(self, x: torch.Tensor, *args, **kwargs):
        """base(x, *args, **kwargs), plus the routed branch (scaled by alpha / rank) when a route is set."""
        y = self.base(x, *args, **kwargs)
        if self.route is None:
            return y
        return y + self.scale * self.delta(x).to(y.dtype)


def attach_routed_lora(model: nn.Module, names: Sequence[str], **lora_kwargs) -> list[RoutedLoRA]:
    """Replace each submodule of `model` named in `names` (dotted, as `named_modules` gives them) by a RoutedLoRA
    around it, in place; -> the wrappers in the order of `names`. kind defaults to "linear" for an nn.Linear and
    "conv" otherwise."""
    modules = dict(model.named_modules())
    if not names:
        raise ValueError("names: expected at least one submodule name")
    wrappers = []
    for name in names:
        if name not in modules or name == "":
            raise ValueError(f"names: {name!r} is not a submodule of {type(model).__name__}")
        base = modules[name]
        if isinstance(base, RoutedLoRA):
            raise ValueError(f"names: {name!r} already carries adapters")
        kind = lora_kwargs.get("kind", "linear" if isinstance(base, nn.Linear) else "conv")
        wrapper = RoutedLoRA(base, **{**lora_kwargs, "kind": kind})
        parent_name, _, leaf = name.rpartition(".")
        setattr(modules[parent_name] if parent_name else model, leaf, wrapper)
        wrappers.append(wrapper)
    return wrappers
