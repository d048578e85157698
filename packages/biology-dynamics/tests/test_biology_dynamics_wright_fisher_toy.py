"""The toy targets: the categorical seeded and normalised, sampled at its probabilities, the empirical KL exact on
known frequencies; the Markov chain stationary, its pairs sampled at their law, its NLL exact on a hand case."""

import math

import pytest
import torch

from flowlab.biology_dynamics.wright_fisher.toy import (
    MarkovTarget,
    categorical_target,
    empirical_kl,
    markov_target,
    pair_kl,
    sample_categorical,
)


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


def test_markov_chain_is_stationary_and_its_pairs_follow_the_law():
    chain = markov_target(4, seed=0)
    torch.testing.assert_close(chain.initial @ chain.transition, chain.initial, atol=1e-12, rtol=0)
    torch.testing.assert_close(chain.transition.sum(-1), torch.ones(4, dtype=torch.float64), atol=1e-12, rtol=0)
    x = chain.sample(20_000, 6, generator=torch.Generator().manual_seed(0))
    last = torch.nn.functional.one_hot(x[:, -1], 4).double().mean(0)
    assert bool(((last - chain.initial).abs() < 5 * (chain.initial * (1 - chain.initial) / 20_000).sqrt()).all())
    assert pair_kl(x, chain) < 0.005  # 15 free cells / (2 n) = 4e-4 of bias
    shuffled = x[torch.randperm(20_000, generator=torch.Generator().manual_seed(1))]
    assert pair_kl(torch.stack([x[:, 0], shuffled[:, 1]], 1), chain) > 10 * pair_kl(x[:, :2], chain)


def test_markov_nll_on_a_hand_case():
    chain = MarkovTarget(torch.tensor([0.5, 0.5], dtype=torch.float64),
                         torch.tensor([[0.9, 0.1], [0.2, 0.8]], dtype=torch.float64))  # fmt: skip
    want = -(math.log(0.5) + math.log(0.1) + math.log(0.8)) / 3
    assert abs(float(chain.nll(torch.tensor([[0, 1, 1]]))[0]) - want) < 1e-12
    with pytest.raises(ValueError, match="L >= 2"):
        pair_kl(torch.zeros(3, 1, dtype=torch.long), chain)
    with pytest.raises(ValueError, match="values in"):
        pair_kl(torch.tensor([[0, 5]]), chain)
    with pytest.raises(ValueError, match="length"):
        chain.sample(3, 0, generator=torch.Generator())
