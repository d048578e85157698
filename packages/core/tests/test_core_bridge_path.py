"""Bridge paths: endpoints, the t(1-t) sigma^2 variance, drift vs finite differences, the conditional score, the
variance-schedule form, and the augmented bridge's SDE drift reproducing the bridge marginals."""

from __future__ import annotations

import math

import pytest
import torch

from flowlab.core.paths.bridge import AugmentedBridgePath, BridgePath, BridgePathSample

F64 = torch.float64


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_endpoints_are_pinned(device):
    g = _gen(0)
    x_0, x_1 = torch.randn(64, 3, generator=g).to(device), torch.randn(64, 3, generator=g).to(device)
    path = BridgePath(0.7)
    for t_value, end in ((0.0, x_0), (1.0, x_1)):
        s = path.sample(x_0, x_1, torch.full((64,), t_value, device=device), generator=None)
        assert isinstance(s, BridgePathSample) and s.x_t.device.type == device.type
        # t is clipped to [1e-4, 1 - 1e-4]: the distance to the endpoint is O(1e-4 |x_1 - x_0| + sigma 1e-2 |z|)
        bound = 1e-4 * (x_1 - x_0).abs() + 0.7 * math.sqrt(1e-4) * s.noise.abs() + 1e-6
        assert bool(((s.x_t - end).abs() <= bound).all())


def test_marginal_mean_and_variance_match_the_bridge():
    n, t, sigma = 40_000, 0.3, 0.8
    x_0, x_1 = torch.full((n, 1), -1.0, dtype=F64), torch.full((n, 1), 2.0, dtype=F64)
    s = BridgePath(sigma).sample(x_0, x_1, torch.full((n,), t, dtype=F64), generator=_gen(1))
    var = t * (1 - t) * sigma**2
    assert float(s.x_t.mean()) == pytest.approx(-1 + 3 * t, abs=5 * math.sqrt(var / n))
    assert float(s.x_t.var()) == pytest.approx(var, abs=5 * var * math.sqrt(2 / n))


def test_drift_matches_finite_differences_and_score_matches_autograd():
    g = _gen(2)
    x_0, x_1 = torch.randn(16, 2, generator=g, dtype=F64), torch.randn(16, 2, generator=g, dtype=F64)
    z = torch.randn(16, 2, generator=g, dtype=F64)
    t = torch.rand(16, generator=g, dtype=F64) * 0.9 + 0.05
    for path in (BridgePath(0.5), BridgePath(lambda u: 0.3 * u**2 + 0.1 * u)):  # S(t): any increasing function
        s = path.sample(x_0, x_1, t, noise=z)
        h = 1e-6
        up, down = path.sample(x_0, x_1, t + h, noise=z), path.sample(x_0, x_1, t - h, noise=z)
        assert torch.allclose(s.dx_t, (up.x_t - down.x_t) / (2 * h), atol=1e-7)
        # the conditional score is grad log N(x_t; mean_t, std_t^2) at x_t
        mean = path.sample(x_0, x_1, t, noise=torch.zeros_like(z)).x_t
        std = (s.x_t - mean) / z
        x = s.x_t.detach().requires_grad_(True)
        (grad,) = torch.autograd.grad(torch.distributions.Normal(mean, std).log_prob(x).sum(), x)
        assert torch.allclose(s.score, grad, atol=1e-9)


def test_variance_schedule_form():
    g = _gen(3)
    x_0, x_1 = torch.randn(8, 4, generator=g, dtype=F64), torch.randn(8, 4, generator=g, dtype=F64)
    z = torch.randn(8, 4, generator=g, dtype=F64)
    t = torch.rand(8, generator=g, dtype=F64)
    # S(t) = sigma^2 t is the constant-sigma bridge
    a = BridgePath(0.6).sample(x_0, x_1, t, noise=z)
    b = BridgePath(lambda u: 0.36 * u).sample(x_0, x_1, t, noise=z)
    for field in ("t", "x_t", "dx_t", "score"):
        assert torch.allclose(getattr(a, field), getattr(b, field), atol=1e-12)
    # S(t) = t^2 (g(t)^2 = 2t): r = t^2, variance r (1 - r)
    n, t0 = 40_000, 0.5
    s = BridgePath(lambda u: u**2).sample(
        torch.zeros(n, 1, dtype=F64), torch.ones(n, 1, dtype=F64), torch.full((n,), t0, dtype=F64), generator=g
    )
    r = t0**2
    assert float(s.x_t.mean()) == pytest.approx(r, abs=5 * math.sqrt(r * (1 - r) / n))
    assert float(s.x_t.var()) == pytest.approx(r * (1 - r), abs=5 * r * (1 - r) * math.sqrt(2 / n))


def test_augmented_bridge_drift_reproduces_the_bridge_marginal():
    """Euler-Maruyama on dX = (x_1 - X)/(1 - t) dt + sigma dW from the noised source lands on the bridge law."""
    n, sigma, steps = 4000, 0.5, 200
    g = _gen(4)
    y, x = torch.zeros(n, 1, dtype=F64), torch.full((n, 1), 1.5, dtype=F64)
    path = AugmentedBridgePath(sigma, source_noise=0.2)
    start = path.sample(y, x, torch.zeros(n, dtype=F64), generator=g)
    assert float(start.x_0.std()) == pytest.approx(0.2, rel=0.05)  # the noised endpoint y'
    X, h = start.x_0.clone(), 0.5 / steps
    for k in range(steps):  # integrate to t = 0.5 with the drift the path regresses on
        drift = (x - X) / (1 - k * h)
        X = X + drift * h + sigma * math.sqrt(h) * torch.randn(n, 1, generator=g, dtype=F64)
    # bridge from y' ~ N(0, 0.2^2): mean t x, variance (1-t)^2 0.2^2 + t(1-t) sigma^2 at t = 0.5
    var = 0.25 * 0.04 + 0.25 * sigma**2
    assert float(X.mean()) == pytest.approx(0.75, abs=5 * math.sqrt(var / n))
    assert float(X.var()) == pytest.approx(var, rel=0.1)
    s = path.sample(y, x, torch.full((n,), 0.5, dtype=F64), generator=g)
    assert float(s.x_t.mean()) == pytest.approx(0.75, abs=5 * math.sqrt(var / n))
    assert float(s.x_t.var()) == pytest.approx(var, rel=0.1)
    assert torch.allclose(s.dx_t, (x - s.x_t) / 0.5)  # the target is that drift at the path's x_t


def test_generator_reproducibility_and_per_sample_generators():
    x_0, x_1, t = torch.zeros(3, 2), torch.ones(3, 2), torch.full((3,), 0.5)
    a = BridgePath(1.0).sample(x_0, x_1, t, generator=_gen(5))
    b = BridgePath(1.0).sample(x_0, x_1, t, generator=_gen(5))
    assert torch.equal(a.x_t, b.x_t)
    gens = [_gen(10 + i) for i in range(3)]
    c = BridgePath(1.0).sample(x_0, x_1, t, generator=gens)
    d = BridgePath(1.0).sample(x_0[1:], x_1[1:], t[1:], generator=[_gen(11), _gen(12)])
    assert torch.equal(c.x_t[1:], d.x_t)  # sample i depends only on generator i


def test_bad_inputs_name_the_argument():
    x = torch.zeros(4, 2)
    path = BridgePath(1.0)
    with pytest.raises(ValueError, match=r"^t:"):
        path.sample(x, x, torch.full((4,), 1.5))
    with pytest.raises(ValueError, match=r"^t:"):
        path.sample(x, x, torch.tensor(0.5))
    with pytest.raises(ValueError, match=r"^noise:"):
        path.sample(x, x, torch.full((4,), 0.5), noise=torch.zeros(4, 3))
    with pytest.raises(ValueError, match="x_0, x_1"):
        path.sample(x, torch.zeros(4, 3), torch.full((4,), 0.5))
    with pytest.raises(ValueError, match=r"^sigma:"):
        BridgePath(0.0)
    with pytest.raises(ValueError, match=r"^source_noise:"):
        AugmentedBridgePath(1.0, source_noise=-1.0)
