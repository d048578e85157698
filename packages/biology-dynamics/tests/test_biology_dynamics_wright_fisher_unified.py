"""The three domains behind one interface: each ELBO is tight for the exact model, each sampler draws from it, and
the unified loss trains one sufficient-statistic network on all three."""

from __future__ import annotations

import pytest
import torch

from flowlab.biology_dynamics.wright_fisher.discrete import DiscreteDomain
from flowlab.biology_dynamics.wright_fisher.nets import SequenceMLP
from flowlab.biology_dynamics.wright_fisher.unified import DOMAINS, UnifiedLoss, domain
from flowlab.core.train import fit

P = torch.tensor([0.6, 0.3, 0.08, 0.02])


class Fixed(torch.nn.Module):
    """Mixture logits that ignore the input: with log p they are the exact model of i.i.d. positions."""

    def __init__(self, logits: torch.Tensor) -> None:
        super().__init__()
        self.logits = torch.nn.Parameter(logits.clone())

    def forward(self, *, x, t=None):
        return self.logits.expand(x.shape[0], -1, -1)


@pytest.mark.parametrize("name", DOMAINS)
def test_every_domain_elbo_is_tight_for_the_exact_model_and_its_sampler_draws_from_it(name):
    """Mixture logits log p with the sufficient-statistic input make the posterior exact, so the negative ELBO equals
    the data's cross-entropy under p (measured within 2 s.e. for each domain at n = 4000; asserted within
    4 s.e. + 0.01 at n = 2000); 2000 sampled letters are within TV 0.035 of p (noise alone about 0.01)."""
    g = torch.Generator().manual_seed(0)
    x = torch.multinomial(P, 2000 * 2, replacement=True, generator=g).reshape(2000, 2)
    cross_entropy = float(-P.double().log()[x].mean())
    dom = domain(name, 4, ssp=True)
    model = Fixed(P.log().expand(2, 4))
    out = dom.elbo(model, x, generator=g, draws=4)
    assert abs(out["nats"] - cross_entropy) < 4 * out["diffusion_se"] + 0.01, out
    letters = dom.sample(model, 1000, 2, steps=60, generator=g)
    freq = torch.bincount(letters.flatten(), minlength=4).double() / letters.numel()
    assert 0.5 * float((freq - P.double()).abs().sum()) < 0.035


def test_masked_domain_trains_to_the_entropy():
    """MDLM on i.i.d. positions: 300 steps bring the NELBO within 0.05 nats (+ 4 s.e.) of H(p), and never below."""
    entropy = float(-(P * P.log()).sum())
    dom = DiscreteDomain(4, kind="masked")
    torch.manual_seed(0)
    net = SequenceMLP(2, 4, channels=5, hidden=(64, 64))
    g = torch.Generator().manual_seed(1)
    data = lambda step, gen: torch.multinomial(P, 256, replacement=True, generator=gen).reshape(128, 2)  # noqa: E731
    fit(net, dom.loss_fn, data, steps=300, optimizer=torch.optim.Adam(net.parameters(), 2e-3), device="cpu",
        generator=g, log_every=100, progress=False)  # fmt: skip
    x = torch.multinomial(P, 4000, replacement=True, generator=g).reshape(2000, 2)
    out = dom.elbo(net, x, generator=g)
    assert entropy - 4 * out["diffusion_se"] < out["nats"] < entropy + 0.05 + 4 * out["diffusion_se"], out


def test_unified_loss_visits_every_domain_and_one_network_serves_all():
    """The domain is drawn per batch (all three within 30 draws); 600 steps of one time-free network bring every
    domain's ELBO within 0.1 nats (+ 4 s.e.) of H(p)."""
    loss = UnifiedLoss(4)
    g = torch.Generator().manual_seed(2)
    picks = {int(torch.randint(3, (1,), generator=g)) for _ in range(30)}
    assert picks == {0, 1, 2}
    entropy = float(-(P * P.log()).sum())
    torch.manual_seed(0)
    net = SequenceMLP(2, 4, hidden=(64, 64), times=False)
    data = lambda step, gen: torch.multinomial(P, 256, replacement=True, generator=gen).reshape(128, 2)  # noqa: E731
    fit(net, loss, data, steps=600, optimizer=torch.optim.Adam(net.parameters(), 2e-3), device="cpu", generator=g,
        log_every=100, progress=False)  # fmt: skip
    x = torch.multinomial(P, 2000, replacement=True, generator=g).reshape(1000, 2)
    for dom in loss.domains:
        out = dom.elbo(net, x, generator=g, draws=4)
        assert out["nats"] < entropy + 0.1 + 4 * out["diffusion_se"], (dom, out)


def test_bad_domain_settings_raise():
    with pytest.raises(ValueError, match="domain: expected one of"):
        domain("protein", 4)
    with pytest.raises(ValueError, match="uniform path only"):
        DiscreteDomain(4, kind="masked", inputs="ssp")
