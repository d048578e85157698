"""The growing Gaussian mixture: its counts grow by the stated ratio per component, its components sit where they
are drawn, and one seed gives one data set."""

from __future__ import annotations

import pytest
import torch

from flowlab.datasets import growth_mixture


def test_counts_grow_by_the_stated_factors_and_the_total_ratio():
    data = growth_mixture(50, 300, generator=torch.Generator().manual_seed(0))
    n0 = int((data.time == 0).sum())
    n1 = int((data.time == 1).sum())
    assert n0 == 300 and n1 == 840  # 100 cells per component, times 4.2, 2.8 and 1.4
    torch.testing.assert_close(data.factors, torch.tensor([4.2, 2.8, 1.4], dtype=torch.float64))
    torch.testing.assert_close(data.growth, data.factors.log())
    for k in range(3):
        counts = [int(((data.time == t) & (data.component == k)).sum()) for t in (0.0, 1.0)]
        assert counts[1] / counts[0] == pytest.approx(float(data.factors[k]))


def test_components_drift_by_the_stated_distance_and_stay_apart():
    """Sample means of 2000 cells (std 0.3 per axis in 50-D: the mean's error is about 0.3 * sqrt(50 / 2000) =
    0.05 in norm) sit at distance `spread` from the origin and move by `drift`."""
    data = growth_mixture(50, 6000, generator=torch.Generator().manual_seed(1))
    x = data.x.double()
    for k in range(3):
        m0 = x[(data.time == 0) & (data.component == k)].mean(0)
        m1 = x[(data.time == 1) & (data.component == k)].mean(0)
        assert float(m0.norm()) == pytest.approx(3.0, abs=0.1)
        assert float((m1 - m0).norm()) == pytest.approx(1.0, abs=0.1)
        spread = x[(data.time == 0) & (data.component == k)].std(0).mean()
        assert float(spread) == pytest.approx(0.3, abs=0.01)


def test_one_seed_one_data_set_and_bad_settings_are_named():
    a = growth_mixture(10, 30, generator=torch.Generator().manual_seed(3))
    b = growth_mixture(10, 30, generator=torch.Generator().manual_seed(3))
    c = growth_mixture(10, 30, generator=torch.Generator().manual_seed(4))
    assert torch.equal(a.x, b.x) and not torch.equal(a.x, c.x)
    # the same law, fresh cells: the component means agree to sampling error, the cells do not
    big = [growth_mixture(10, 3000, generator=torch.Generator().manual_seed(s), law=torch.Generator().manual_seed(7))
           for s in (0, 1)]  # fmt: skip
    assert not torch.equal(big[0].x, big[1].x)
    means = [d.x[(d.time == 0) & (d.component == 0)].mean(0) for d in big]
    assert float((means[0] - means[1]).norm()) < 0.1  # 0.3 * sqrt(10 / 1000) * sqrt(2) = 0.04 expected
    with pytest.raises(ValueError, match="mass_ratio"):
        growth_mixture(10, 30, mass_ratio=0.0)
    with pytest.raises(ValueError, match="n0"):
        growth_mixture(10, 2)
    with pytest.raises(ValueError, match="drift"):
        growth_mixture(10, 30, drift=float("nan"))
