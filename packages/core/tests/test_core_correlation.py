"""Rank and linear correlation against SciPy's reference implementations and known values."""

from __future__ import annotations

import math

import pytest
import torch
from scipy import stats

from flowlab.core.metrics import pearson, rankdata, spearman


def test_against_scipy_with_and_without_ties():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(200, generator=g, dtype=torch.float64)
    y = x + 0.5 * torch.randn(200, generator=g, dtype=torch.float64)
    ties = torch.randint(0, 6, (200,), generator=g).double()
    assert spearman(x, y) == pytest.approx(stats.spearmanr(x.numpy(), y.numpy()).statistic, abs=1e-12)
    assert spearman(ties, y) == pytest.approx(stats.spearmanr(ties.numpy(), y.numpy()).statistic, abs=1e-12)
    assert pearson(x, y) == pytest.approx(stats.pearsonr(x.numpy(), y.numpy()).statistic, abs=1e-12)
    assert torch.equal(rankdata(ties), torch.as_tensor(stats.rankdata(ties.numpy()), dtype=torch.float64))


def test_known_values_and_invariance_to_monotone_maps():
    x = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert spearman(x, x**3) == 1.0 and spearman(x, -x) == -1.0  # exact: ranks are exact in float64
    assert spearman(torch.tensor([1.0, 2, 2, 3]), x) == pytest.approx(math.sqrt(0.9), abs=1e-15)
    torch.testing.assert_close(rankdata(torch.tensor([3.0, 1.0, 3.0])), torch.tensor([2.5, 1.0, 2.5]).double())
    assert math.isnan(spearman(torch.ones(4), x)) and math.isnan(pearson(x, torch.zeros(4)))


def test_bad_inputs_name_the_argument():
    with pytest.raises(ValueError, match=r"^x, y:"):
        pearson(torch.ones(3), torch.ones(4))
    with pytest.raises(ValueError, match=r"^x:"):
        rankdata(torch.tensor([1.0, math.nan]))
    with pytest.raises(ValueError, match=r"^y:"):
        pearson(torch.ones(2), torch.tensor([]))
