"""The 2-D toy teachers with exact velocities: the 8-square checkerboard and eight Gaussians (radius 2, std 0.2,
the `flowlab.datasets` toys), each with its modes for the coverage measures."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from flowlab.core.testing import Checkerboard, GaussianMixture
from flowlab.core.validation import check_choice

__all__ = ["TOY_NAMES", "ToyTeacher", "toy_teacher"]

TOY_NAMES = ("checkerboard", "eight_gaussians")


@dataclass(frozen=True)
class ToyTeacher:
    """`velocity(x=, t=)` the exact CondOT velocity; `sample(n, generator)` data draws (n, 2); `mode(x)` the mode
    index of each point (n,), -1 off every mode; `num_modes`."""

    name: str
    problem: Any
    num_modes: int = 8

    def velocity(self, *, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """The exact CondOT velocity of the toy: x: (n, 2), t: (n,) -> (n, 2)."""
        return self.problem.velocity(x=x, t=t) if self.name == "checkerboard" else self.problem.velocity(x, t)

    def sample(self, n: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """`n` float32 draws from the toy's data distribution: (n, 2)."""
        return self.problem.sample_data(n, generator=generator).float()

    def mode(self, x: torch.Tensor) -> torch.Tensor:
        """The mode index of each point, -1 off every mode: x: (n, 2) -> (n,) int64."""
        if self.name == "checkerboard":
            corners = self.problem.corners.to(x)
            cell = torch.floor(x)
            hit = (cell[:, None] == corners[None]).all(-1)  # (n, 8)
            return torch.where(hit.any(-1), hit.float().argmax(-1), torch.full_like(hit[:, 0], -1, dtype=torch.long))
        d = torch.cdist(x.double(), self.problem.means.double())
        near, index = d.min(-1)
        return torch.where(near < 3 * 0.2, index, torch.full_like(index, -1))


def toy_teacher(name: str) -> ToyTeacher:
    """The exact teacher of a toy of TOY_NAMES."""
    check_choice(name, TOY_NAMES, "name")
    if name == "checkerboard":
        return ToyTeacher(name, Checkerboard())
    return ToyTeacher(name, GaussianMixture.ring(8, radius=2.0, std=0.2))
