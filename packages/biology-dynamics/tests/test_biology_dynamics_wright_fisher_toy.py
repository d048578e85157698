"""The toy categorical targets: seeded and normalised, sampled at their probabilities, and the empirical KL exact on
known frequencies."""

import math

import pytest
import torch

from flowlab.biology_dynamics.wright_fisher.toy import categorical_target, empirical_kl, sample_categorical


def test_targets_are_seeded_normalised_distributions():
    a, b = categorical_target(20, seed=3), categorical_target(20, seed=3)
    assert torch.equal(a, b) and not torch.equal(a, categorical_target(20, seed=4))
    assert abs(float(a.sum()) - 1) < 1e-12 and bool((a > 0).all())


def test_samples_follow_the_target_within_five_standard_errors():
    probs, n = categorical_target(4, seed=0), 20_000
    x = sample_categorical(probs, n, 3, generator=torch.Generator().manual_seed(0))
    assert x.shape == (n, 3) and x.dtype == torch.long
    freq = torch.nn.functional.one_hot(x, 4).double().mean((0, 1))
    se = (probs * (1 - probs) / (3 * n)).sqrt()
    assert bool(((freq - probs).abs() < 5 * se + 1e-12).all())


def test_empirical_kl_on_known_frequencies():
    probs = torch.tensor([0.5, 0.25, 0.25], dtype=torch.float64)
    letters = torch.tensor([[0, 0], [0, 1], [1, 2], [2, 2]])  # position 0: (1/2, 1/4, 1/4); position 1: (1/4, 1/4, 1/2)
    want = 0.5 * (0.0 + 0.25 * math.log(0.5) + 0.5 * math.log(2))
    assert abs(empirical_kl(letters, probs) - want) < 1e-12
    with pytest.raises(ValueError, match="values in"):
        empirical_kl(torch.tensor([[3]]), probs)
    with pytest.raises(ValueError, match="letters"):
        categorical_target(1, seed=0)
