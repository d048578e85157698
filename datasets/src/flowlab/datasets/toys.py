"""Generic 2-D toy distributions with a seeded `generator`: eight Gaussians, two moons, checkerboard, rings."""

from __future__ import annotations

import math

import torch

from flowlab.core.validation import check_choice

__all__ = ["TOYS", "sample_toy"]

TOYS = ("eight_gaussians", "moons", "checkerboard", "rings")


def sample_toy(
    name: str, n: int, *, generator: torch.Generator | None = None, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """n points (n, 2) of the named toy, roughly standardised to unit scale."""
    check_choice(name, TOYS, "name")
    if n < 1:
        raise ValueError(f"n: expected a positive number of points, got {n}")
    g = generator
    if name == "eight_gaussians":
        k = torch.randint(0, 8, (n,), generator=g)
        angle = k.to(dtype) * (2 * math.pi / 8)
        centres = 2.0 * torch.stack([angle.cos(), angle.sin()], -1)
        return centres + 0.2 * torch.randn(n, 2, generator=g, dtype=dtype)
    if name == "moons":
        upper = torch.rand(n, generator=g) < 0.5
        a = math.pi * torch.rand(n, generator=g, dtype=dtype)
        x = torch.where(upper, a.cos(), 1 - a.cos())
        y = torch.where(upper, a.sin(), 0.5 - a.sin())
        pts = torch.stack([x, y], -1) + 0.05 * torch.randn(n, 2, generator=g, dtype=dtype)
        return (pts - torch.tensor([0.5, 0.25], dtype=dtype)) * 2
    if name == "checkerboard":
        x = 4 * torch.rand(n, generator=g, dtype=dtype) - 2
        col = torch.floor(x).to(torch.long) % 2
        y = torch.rand(n, generator=g, dtype=dtype) + 2 * torch.randint(0, 2, (n,), generator=g).to(dtype) - 2
        y = y + col.to(dtype)
        return torch.stack([x, y], -1)
    radius = torch.randint(1, 4, (n,), generator=g).to(dtype) * 0.75
    a = 2 * math.pi * torch.rand(n, generator=g, dtype=dtype)
    pts = radius[:, None] * torch.stack([a.cos(), a.sin()], -1)
    return pts + 0.05 * torch.randn(n, 2, generator=g, dtype=dtype)
