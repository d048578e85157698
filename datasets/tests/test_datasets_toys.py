"""The 2-D toys against the core's analytic versions of the same laws."""

from __future__ import annotations

import torch

from flowlab.core.testing.checkerboard import Checkerboard
from flowlab.datasets.toys import sample_toy


def test_checkerboard_toy_is_the_core_analytic_checkerboard():
    """Same support (the 8 squares with i + j even) and the same moments to 0.01 at 400k draws."""
    g = torch.Generator().manual_seed(0)
    toy = sample_toy("checkerboard", 400_000, generator=g).double()
    exact = Checkerboard().sample_data(400_000, generator=g).double()
    assert bool((torch.floor(toy).sum(1) % 2 == 0).all())
    torch.testing.assert_close(toy.mean(0), exact.mean(0), atol=0.01, rtol=0)
    torch.testing.assert_close(toy.std(0), exact.std(0), atol=0.01, rtol=0)
