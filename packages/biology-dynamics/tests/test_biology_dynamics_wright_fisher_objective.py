"""The Wright-Fisher ELBO, the hollow wrapper and the reverse-SDE sampler."""

from __future__ import annotations

import math

import pytest
import torch

from flowlab.biology_dynamics.wright_fisher import WrightFisherPath
from flowlab.biology_dynamics.wright_fisher.hollow import Hollow
from flowlab.biology_dynamics.wright_fisher.nets import SequenceMLP
from flowlab.biology_dynamics.wright_fisher.objective import WrightFisherELBO, metric_norm
from flowlab.biology_dynamics.wright_fisher.sample import sample_wright_fisher, simplex_noise
from flowlab.core.train import fit

F64 = torch.float64


class Fixed(torch.nn.Module):
    """Logits that ignore the input: (B, L, K) copies of `logits` (L, K)."""

    def __init__(self, logits: torch.Tensor) -> None:
        super().__init__()
        self.logits = torch.nn.Parameter(logits.clone())

    def forward(self, *, x, t=None):
        return self.logits.expand(x.shape[0], -1, -1)


def test_metric_norm_is_the_quadratic_form_of_the_wright_fisher_metric():
    torch.manual_seed(0)
    x = torch.distributions.Dirichlet(torch.ones(5, dtype=F64)).sample((7,))
    d = torch.randn(7, 5, dtype=F64)
    sigma = torch.diag_embed(x) - x[:, :, None] * x[:, None, :]
    quad = torch.einsum("bi,bij,bj->b", d, sigma, d)
    torch.testing.assert_close(metric_norm(x * d, x), quad)
    noise = simplex_noise(x[:, None, :], torch.eye(5, dtype=F64).expand(7, 5, 5))  # row j: G e_j
    torch.testing.assert_close(noise.transpose(1, 2) @ noise, sigma, rtol=1e-10, atol=1e-12)


def test_diffusion_term_is_zero_for_the_true_letter_and_positive_otherwise():
    """x_hat_0 = e_{x_0} (logits +60 at the clean letter) makes d = 0; uniform weights do not."""
    obj = WrightFisherELBO(WrightFisherPath(4))
    g = torch.Generator().manual_seed(0)
    x_0 = torch.randint(0, 4, (64, 3), generator=g)
    noisy = obj.noisy(x_0, obj.sample_times(64, generator=g), generator=g)
    exact = torch.nn.functional.one_hot(x_0, 4).to(F64) * 60
    assert float(obj.diffusion_term(exact, x_0, noisy).abs().max()) < 1e-12
    assert float(obj.diffusion_term(torch.zeros(64, 3, 4, dtype=F64), x_0, noisy).mean()) > 0.1


def test_elbo_of_the_uniform_model_is_about_log_k_and_training_makes_it_tight():
    """Positions i.i.d. from a categorical p: a model with uniform weights scores >= log 4 (it is exact up to the
    path's tiny mixing error, so within 0.1 + 4 s.e.); a SequenceMLP trained 400 steps reaches an ELBO within 0.05
    nats of H(p) (+ 4 s.e.) and never below it (- 4 s.e.): the bound is valid and tight."""
    p = torch.tensor([0.6, 0.3, 0.08, 0.02])
    entropy = float(-(p * p.log()).sum())
    obj = WrightFisherELBO(WrightFisherPath(4))
    g = torch.Generator().manual_seed(1)
    x_eval = torch.multinomial(p, 1024 * 2, replacement=True, generator=g).reshape(1024, 2)
    flat = obj.elbo(Fixed(torch.zeros(2, 4)), x_eval, generator=g)
    assert abs(flat["nats"] - math.log(4)) < 0.1 + 4 * flat["diffusion_se"]
    torch.manual_seed(0)
    net = SequenceMLP(2, 4, hidden=(64, 64))
    data = lambda step, gen: torch.multinomial(p, 256, replacement=True, generator=gen).reshape(128, 2)  # noqa: E731
    result = fit(net, obj.loss_fn, data, steps=400, optimizer=torch.optim.Adam(net.parameters(), 2e-3),
                 device="cpu", generator=g, log_every=100, progress=False)  # fmt: skip
    assert result.history[-1]["nan_rate"] == 0
    out = obj.elbo(net, x_eval, generator=g, draws=16)
    assert entropy - 4 * out["diffusion_se"] < out["nats"] < entropy + 0.05 + 4 * out["diffusion_se"]
    assert 0 < out["prior"] < 0.01 and 0 <= out["reconstruction"] < 1e-3


@torch.no_grad()
def test_hollow_output_at_a_position_ignores_that_position():
    torch.manual_seed(0)
    net = Hollow(SequenceMLP(5, 4, hidden=(32,)))
    x = torch.distributions.Dirichlet(torch.ones(4)).sample((3, 5))
    t = torch.rand(3)
    out = net(x=x, t=t)
    for d in range(5):
        y = x.clone()
        y[:, d] = torch.distributions.Dirichlet(torch.ones(4)).sample((3,))
        changed = net(x=y, t=t)
        torch.testing.assert_close(changed[:, d], out[:, d])
        others = [i for i in range(5) if i != d]
        assert float((changed[:, others] - out[:, others]).abs().max()) > 1e-6


def test_sampler_recovers_a_known_categorical_with_the_exact_prior_model():
    """With mixture weights equal to the target p at every position (the exact model for i.i.d. positions, a
    hollow model's optimum), the reverse SDE (100 steps) draws letters whose frequencies match p: total variation
    < 0.03 from 3000 draws (sampling noise alone is about 0.01). Samples are on the simplex."""
    p = torch.tensor([0.6, 0.3, 0.08, 0.02])
    obj = WrightFisherELBO(WrightFisherPath(4))
    g = torch.Generator().manual_seed(2)
    model = Fixed(p.log().expand(1, 4))
    letters = sample_wright_fisher(obj, model, 3000, 1, steps=100, generator=g)
    freq = torch.bincount(letters.flatten(), minlength=4).double() / letters.numel()
    assert 0.5 * float((freq - p.double()).abs().sum()) < 0.03
    x = sample_wright_fisher(obj, model, 200, 1, steps=50, generator=g, return_simplex=True)
    assert bool((x >= 0).all()) and float((x.sum(-1) - 1).abs().max()) < 1e-6
    with pytest.raises(ValueError, match="steps"):
        sample_wright_fisher(obj, model, 10, 1, steps=0, generator=g)
