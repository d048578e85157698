"""Key routing of MOLM: a binary key of M = L log2(P) bits split into L big-endian chunks, chunk l choosing which of
the P adapters of marked block l is active, and the `MarkerSet` that attaches and routes the adapters.

    markers = MarkerSet.attach(decoder, blocks=digits_blocks(), num_adapters=4, rank=4)
    markers.route(keys)          # keys (B, M) bits -> each block's (B,) adapter index; markers.off() restores
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import torch
from torch import nn

from flowlab.core.nets.lora import RoutedLoRA, attach_routed_lora

__all__ = ["DIGITS_BLOCKS", "MarkerSet", "autoencoder_kl_blocks", "key_to_routes", "routes_to_key"]

#: the kit's tiny digits decoder (channels (16, 32)): its input conv, both residual blocks and the conv after the
#: upsampling (4 blocks, so 8-bit keys with 4 adapters each)
DIGITS_BLOCKS = ("0", "1", "3", "4.0")


def autoencoder_kl_blocks(decoder: nn.Module, *, attention: bool = True) -> tuple[str, ...]:
    """The names of a diffusers `AutoencoderKL.decoder`'s ResnetBlock2D modules (mid block and up blocks: 14 in
    Stable Diffusion's VAE) and, with `attention`, its attention value projections (`...attentions.N.to_v`)."""
    names = [n for n, m in decoder.named_modules() if type(m).__name__ == "ResnetBlock2D"]
    if attention:
        names += [f"{n}.to_v" for n, m in decoder.named_modules() if type(m).__name__ == "Attention"]
    if not names:
        raise ValueError(f"decoder: no ResnetBlock2D inside {type(decoder).__name__} (not an AutoencoderKL decoder)")
    return tuple(names)


def _bits_per_block(num_adapters: int) -> int:
    bits = int(math.log2(num_adapters)) if num_adapters >= 2 else 0
    if num_adapters < 2 or 2**bits != num_adapters:
        raise ValueError(f"num_adapters: expected a power of two >= 2, got {num_adapters!r}")
    return bits


def key_to_routes(keys: torch.Tensor, num_blocks: int, num_adapters: int) -> torch.Tensor:
    """keys (B, M) bits, M = num_blocks log2(num_adapters) -> (B, num_blocks) adapter indices (big-endian chunks)."""
    bits = _bits_per_block(num_adapters)
    m = num_blocks * bits
    if not isinstance(keys, torch.Tensor) or keys.dim() != 2 or keys.shape[1] != m:
        got = tuple(keys.shape) if isinstance(keys, torch.Tensor) else type(keys).__name__
        raise ValueError(f"keys: expected a (B, {m}) tensor of bits, got {got}")
    if not bool(((keys == 0) | (keys == 1)).all()):
        raise ValueError("keys: expected bits (0 or 1)")
    weights = 2 ** torch.arange(bits - 1, -1, -1, device=keys.device)
    return (keys.long().view(keys.shape[0], num_blocks, bits) * weights).sum(-1)


def routes_to_key(routes: torch.Tensor, num_adapters: int) -> torch.Tensor:
    """(B, L) adapter indices -> (B, L log2(num_adapters)) key bits; the inverse of `key_to_routes`."""
    bits = _bits_per_block(num_adapters)
    shifts = torch.arange(bits - 1, -1, -1, device=routes.device)
    return ((routes[..., None] >> shifts) & 1).flatten(1)


class MarkerSet(nn.Module):
    """The L RoutedLoRA wrappers inside one frozen generator, in key order, and the key layout."""

    def __init__(self, wrappers: Sequence[RoutedLoRA], names: Sequence[str]) -> None:
        super().__init__()
        self.adapters = nn.ModuleList(wrappers)
        self.names = tuple(names)
        self.num_adapters = wrappers[0].num_adapters
        self.key_bits = len(wrappers) * _bits_per_block(self.num_adapters)

    @classmethod
    def attach(
        cls, generator: nn.Module, blocks: Sequence[str], *, num_adapters: int = 4, rank: int = 4, alpha: float = 4.0
    ) -> MarkerSet:
        """Freeze `generator`, put a RoutedLoRA of `num_adapters` rank-`rank` adapters around each named block
        (in place) and return their MarkerSet (routes off)."""
        _bits_per_block(num_adapters)
        generator.requires_grad_(False)
        wrappers = attach_routed_lora(generator, list(blocks), num_adapters=num_adapters, rank=rank, alpha=alpha)
        return cls(wrappers, blocks)

    def route(self, keys: torch.Tensor) -> None:
        """Route every sample of the next forward by its key: keys (B, key_bits) bits."""
        routes = key_to_routes(keys, len(self.adapters), self.num_adapters)
        for j, adapter in enumerate(self.adapters):
            adapter.set_route(routes[:, j])

    def off(self) -> None:
        """Switch every adapter off: the generator computes exactly its frozen output."""
        for adapter in self.adapters:
            adapter.set_route(None)

    def adapter_parameters(self) -> Iterator[nn.Parameter]:
        """The trainable adapter weights (down and up projections of every block)."""
        for adapter in self.adapters:
            yield adapter.down
            yield adapter.up

    def adapter_state(self) -> dict[str, torch.Tensor]:
        """name -> tensor of every adapter weight ("<block>.down", "<block>.up"), for safetensors."""
        return {f"{n}.{p}": getattr(a, p).detach() for n, a in zip(self.names, self.adapters, strict=True)
                for p in ("down", "up")}  # fmt: skip

    def load_adapter_state(self, state: dict[str, torch.Tensor]) -> None:
        """Load `adapter_state` tensors; ValueError naming a missing or wrong-shape tensor."""
        for name, adapter in zip(self.names, self.adapters, strict=True):
            for p in ("down", "up"):
                t, want = state.get(f"{name}.{p}"), getattr(adapter, p)
                if t is None or t.shape != want.shape:
                    got = "missing" if t is None else f"shape {tuple(t.shape)}"
                    raise ValueError(f"markers: tensor {name}.{p} is {got}, expected {tuple(want.shape)}")
                want.data.copy_(t)
