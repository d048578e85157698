"""The simplex flow baselines: Dirichlet FM's conditional rate against the incomplete-beta derivative (mpmath), its
conditional velocity transporting the Dirichlet path, linear simplex FM's exact straight paths, and both trained on a
toy categorical to a small sample KL."""

import itertools

import mpmath
import pytest
import torch

from flowlab.biology_dynamics.wright_fisher.baselines import DirichletFM, LinearSimplexFM, dirichlet_rate
from flowlab.biology_dynamics.wright_fisher.nets import SequenceMLP
from flowlab.biology_dynamics.wright_fisher.toy import categorical_target, empirical_kl, sample_categorical
from flowlab.core.train import fit


def _rate_reference(x: float, a: float, k: int) -> float:
    """-d/da I_x(1 + a, K - 1) / (p(x)(1 - x)) by quadrature at 30 digits, over the shorter side of the mean (the
    two tails cancel: their sum is 0)."""
    mpmath.mp.dps = 30
    e = mpmath.digamma(1 + a) - mpmath.digamma(k + a)
    density = lambda s: s**a * (1 - s) ** (k - 2) / mpmath.beta(1 + a, k - 1)  # noqa: E731
    integrand = lambda s: (mpmath.log(s) - e) * density(s)  # noqa: E731
    upper = x > (1 + a) / (k + a)
    tail = mpmath.quad(integrand, [x, 1]) if upper else -mpmath.quad(integrand, [0, x])
    return float(tail / (density(mpmath.mpf(x)) * (1 - x)))


@pytest.mark.parametrize("k", [2, 4, 20])
def test_dirichlet_rate_matches_the_incomplete_beta_derivative(k):
    xs, a_s = [1e-3, 0.1, 0.4, 0.8, 0.99], [0.0, 0.5, 3.0, 7.0]
    got = dirichlet_rate(torch.tensor(xs)[:, None].expand(-1, 4), torch.tensor(a_s).expand(5, -1), k)
    want = torch.tensor([[_rate_reference(x, a, k) for a in a_s] for x in xs], dtype=torch.float64)
    assert bool((got >= 0).all())
    torch.testing.assert_close(got, want, rtol=1e-4, atol=0)


def test_dirichlet_velocity_transports_the_path():
    """Integrating u(x | b) from Dirichlet(1) at t = 0 gives x_b ~ Beta(alpha_max, K - 1) at t = 1: mean and second
    moment within 5 standard errors (+ an Euler allowance of 0.005)."""
    k, n, b = 4, 8000, 2
    flow, g = DirichletFM(k), torch.Generator().manual_seed(0)
    x = flow.noisy(torch.full((n, 1), b), torch.zeros(n), generator=g)
    vertex = torch.nn.functional.one_hot(torch.tensor(b), k)
    grid = torch.linspace(0, 1, 101, dtype=torch.float64)
    for t, t_next in itertools.pairwise(grid):
        c = dirichlet_rate(x[..., b : b + 1], t * (flow.alpha_max - 1), k) * (flow.alpha_max - 1)
        x = x + (t_next - t) * c * (vertex - x)
    x_b, a = x[:, 0, b], flow.alpha_max
    mean, second = a / (a + k - 1), a * (a + 1) / ((a + k - 1) * (a + k))
    assert abs(float(x_b.mean()) - mean) < 5 * float(x_b.std()) / n**0.5 + 0.005
    assert abs(float((x_b**2).mean()) - second) < 5 * float((x_b**2).std()) / n**0.5 + 0.005
    assert abs(float(x.sum(-1).max()) - 1) < 1e-9 and float(x.min()) >= 0


def test_linear_velocity_follows_the_straight_path():
    """The conditional velocity (e_b - x) / (1 - t) carries x_t to x_t' = e_b + (1 - t') / (1 - t) (x_t - e_b)."""
    k, n = 5, 64
    flow, g = LinearSimplexFM(k), torch.Generator().manual_seed(1)
    x_0 = torch.randint(k, (n, 3), generator=g)
    x = start = flow.noisy(x_0, torch.full((n,), 0.2), generator=g)
    vertex = torch.nn.functional.one_hot(x_0, k).double()
    assert bool((torch.gather(start, -1, x_0[..., None]) >= 0.2 - 1e-12).all())
    grid = torch.linspace(0.2, 0.9, 4001, dtype=torch.float64)
    for t, t_next in itertools.pairwise(grid):
        x = x + (t_next - t) * flow.rates(x, t.expand(n)) * (vertex - x)
    torch.testing.assert_close(x, vertex + (0.1 / 0.8) * (start - vertex), atol=2e-4, rtol=0)


@pytest.mark.parametrize("flow", [DirichletFM(4), LinearSimplexFM(4)], ids=repr)
def test_simplex_flows_learn_a_toy_categorical(flow):
    """600 steps on independent positions over K = 4 letters: the cross-entropy falls, training is finite and 2000
    samples are within KL 0.1 of the target (measured: Dirichlet FM 0.025, linear 0.054; a fresh target sample sits
    at about 0.001, the uniform law at 1.45)."""
    probs = categorical_target(4, seed=0)
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    net = SequenceMLP(2, 4, hidden=(64, 64))
    data = lambda step, gen: sample_categorical(probs, 128, 2, generator=gen)  # noqa: E731
    result = fit(net, flow.loss_fn, data, steps=600, optimizer=torch.optim.Adam(net.parameters(), 2e-3),
                 device="cpu", generator=g, log_every=100, progress=False)  # fmt: skip
    losses = [h["loss"] for h in result.history]
    assert losses[-1] < 0.6 * losses[0] and all(h["nan_rate"] == 0 for h in result.history)
    letters = flow.sample(net, 2000, 2, steps=50, generator=g)
    assert letters.shape == (2000, 2) and letters.dtype == torch.long
    assert empirical_kl(letters, probs) < 0.1


def test_simplex_flows_reject_bad_settings():
    with pytest.raises(ValueError, match="letters"):
        DirichletFM(1)
    with pytest.raises(ValueError, match="alpha_max"):
        DirichletFM(4, alpha_max=1.0)
    with pytest.raises(ValueError, match="t_hi"):
        LinearSimplexFM(4, t_hi=1.0)
    with pytest.raises(ValueError, match="steps"):
        LinearSimplexFM(4).sample(SequenceMLP(2, 4), 4, 2, steps=0, generator=torch.Generator())
    g = torch.Generator().manual_seed(0)
    with pytest.raises(ValueError, match="x_0: expected letters in"):
        DirichletFM(4).loss_fn(SequenceMLP(2, 4), torch.tensor([[0, 4]]), g)
    with pytest.raises(ValueError, match="x_0: expected"):
        DirichletFM(4).loss_fn(SequenceMLP(2, 4), torch.zeros(2, 2), g)
    with pytest.raises(ValueError, match="model: expected logits of shape"):
        LinearSimplexFM(4).loss_fn(SequenceMLP(2, 5, channels=4), torch.zeros(2, 2, dtype=torch.long), g)
