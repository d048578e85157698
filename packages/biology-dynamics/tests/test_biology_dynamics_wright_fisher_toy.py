"""The toy targets: the categorical seeded and normalised, sampled at its probabilities, the empirical KL exact on
known frequencies (one law, or one per position); bad probabilities refused; the Markov chain stationary, its pairs
sampled at their law, its NLL exact on a hand case."""

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


def test_empirical_kl_with_one_law_per_position():
    """probs (L, K): each position's frequencies against its own row; rows equal to one law give that law's KL."""
    probs = torch.tensor([[0.5, 0.25, 0.25], [0.25, 0.25, 0.5]], dtype=torch.float64)
    letters = torch.tensor([[0, 0], [0, 1], [1, 2], [2, 2]])  # frequencies equal to the rows: KL 0
    assert abs(empirical_kl(letters, probs)) < 1e-12
    shared = torch.tensor([0.5, 0.25, 0.25], dtype=torch.float64)
    assert abs(empirical_kl(letters, shared.expand(2, -1)) - empirical_kl(letters, shared)) < 1e-12


BAD_PROBS = {
    "a list": [0.5, 0.5],
    "a 0-d tensor": torch.tensor(1.0),
    "an empty tensor": torch.zeros(0),
    "a 3-d tensor": torch.full((1, 1, 2), 0.5),
    "a NaN": torch.tensor([0.5, math.nan]),
    "an infinity": torch.tensor([math.inf, 0.5]),
    "a negative entry": torch.tensor([1.5, -0.5]),
    "a sum of 0.9": torch.tensor([0.5, 0.4]),
    "a sum off by 1e-5": torch.tensor([0.5, 0.50001], dtype=torch.float64),
}


@pytest.mark.parametrize("probs", BAD_PROBS.values(), ids=BAD_PROBS.keys())
def test_bad_probabilities_are_refused(probs):
    """sample_categorical and empirical_kl raise a ValueError naming `probs` for anything but finite non-negative
    rows summing to 1 within 1e-6: (K,) for both, (L, K) one row per position for empirical_kl only."""
    letters, g = torch.zeros(4, 2, dtype=torch.long), torch.Generator().manual_seed(0)
    with pytest.raises(ValueError, match="probs"):
        sample_categorical(probs, 4, 2, generator=g)
    with pytest.raises(ValueError, match="probs"):
        empirical_kl(letters, probs)


def test_probability_shapes_and_tolerance():
    """Sums within 1e-6 of 1 pass; (L, K) needs one row per position and is not a law to sample letters from."""
    close = torch.tensor([0.5, 0.5 + 5e-7], dtype=torch.float64)
    letters = torch.zeros(4, 2, dtype=torch.long)
    assert sample_categorical(close, 4, 2, generator=torch.Generator().manual_seed(0)).shape == (4, 2)
    assert empirical_kl(letters, close) >= 0
    rows = torch.full((3, 2), 0.5)
    with pytest.raises(ValueError, match=r"probs: .*\(K,\) or \(2, K\) tensor.*got \(3, 2\)"):
        empirical_kl(letters, rows)
    with pytest.raises(ValueError, match=r"probs: .*\(K,\) tensor.*got \(2, 2\)"):
        sample_categorical(rows[:2], 4, 2, generator=torch.Generator().manual_seed(0))


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
