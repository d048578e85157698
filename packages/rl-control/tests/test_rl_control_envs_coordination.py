"""The two-agent coordination games: payoffs at their defining points, behaviour data, the product of marginals."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from flowlab.rl_control.envs.coordination import GAMES, game, game_dataset, product_of_marginals


def _joint(a1, a2) -> torch.Tensor:
    return torch.tensor([[a1, a2]], dtype=torch.float64)


def test_payoffs_at_their_defining_points():
    c0, c1 = (-0.5, 0.0), (0.5, 0.0)
    matrix = game("matrix").payoff
    for (a1, a2), r in (((c0, c0), -1.0), ((c0, c1), 1.0), ((c1, c0), 1.0), ((c1, c1), 2.0)):
        assert float(matrix(_joint(a1, a2))) == pytest.approx(r, abs=1e-5)  # the other kernel is exp(-12.5)
    assert float(game("quadratic").payoff(_joint((0.5, 0.5), (-0.5, 0.5)))) == pytest.approx(1.0)
    assert float(game("quadratic").payoff(_joint((0.5, 0.5), (0.5, -0.5)))) == pytest.approx(0.0)
    assert float(game("ring").payoff(_joint((0.5, 0.0), (-0.5, 0.0)))) == pytest.approx(1.0)
    assert float(game("ring").payoff(_joint((0.5, 0.0), (0.5, 0.0)))) < 1e-20
    assert float(game("xor").payoff(_joint((0.5, 0.3), (-0.5, -0.9)))) == pytest.approx(
        1.0, abs=1e-4
    )  # tanh(5)^2 = 0.99982
    assert float(game("xor").payoff(_joint((0.5, 0.3), (0.5, -0.9)))) == pytest.approx(0.0, abs=1e-4)


def test_behaviour_data_has_the_declared_mode_weights_and_coordinates():
    for name, g in GAMES.items():
        data = game_dataset(name, 4000, seed=0)
        assert data.observations.shape == (4000, 2, 1) and data.actions.shape == (4000, 2, 2)
        assert data.terminations.all() and np.abs(data.actions).max() <= 1
        acts = torch.as_tensor(data.actions, dtype=torch.float64)
        if g.modes is not None:
            nearest = torch.cdist(acts.flatten(1), g.modes.double().flatten(1)).argmin(1)
            freq = torch.bincount(nearest, minlength=len(g.modes)).double() / 4000
            assert (freq - g.weights.double()).abs().max() < 0.03  # 4 binomial s.e. at n = 4000
        # the behaviour coordinates: its return beats the product of its own marginals (quadratic: separable, equal)
        prod = product_of_marginals(acts, generator=torch.Generator().manual_seed(0))
        gain = float(g.payoff(acts).mean() - g.payoff(prod).mean())
        assert gain > 0.1 if name != "quadratic" else abs(gain) < 0.05


def test_product_of_marginals_keeps_each_agents_marginal():
    a = torch.randn(500, 3, 2, generator=torch.Generator().manual_seed(1))
    p = product_of_marginals(a, generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(p.sort(0).values, a.sort(0).values)
    assert not torch.equal(p, a)


def test_unknown_game_and_bad_sizes_are_refused():
    with pytest.raises(ValueError, match=r"env: unknown coordination game 'chess'"):
        game("chess")
    with pytest.raises(ValueError, match=r"n_transitions: expected a positive int"):
        game_dataset("xor", 0, seed=0)
