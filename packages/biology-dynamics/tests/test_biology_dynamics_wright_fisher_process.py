"""The exact Wright-Fisher forward sampler: the mean identity E[x | b] = pi + e^(-psi tau / 2) (e_b - pi) from the
lineage series (1e-6), the sampler's means against it, the linear-signal dilation, and bad input."""

from __future__ import annotations

import math

import pytest
import torch

from flowlab.biology_dynamics.wright_fisher.process import WrightFisherPath

F64 = torch.float64
PATH = WrightFisherPath(4)  # DNA: 4 letters, psi = 4


def test_dilation_makes_the_signal_linear():
    t = torch.linspace(0, 0.99, 12, dtype=F64)
    torch.testing.assert_close(torch.exp(-PATH.psi * PATH.tau(t) / 2), PATH.signal(t))
    torch.testing.assert_close(PATH.signal(t), 1 - (1 - t) * PATH.t_max)


def test_exact_mean_identity_from_the_lineage_series():
    """sum_m q_m (psi pi + m e_b) / (psi + m) = pi + e^(-psi tau / 2) (e_b - pi), to 1e-6, from tau = 0.11 to 3.4."""
    t = torch.tensor([0.0, 0.2, 0.5, 0.7, 0.8], dtype=F64)
    pi = torch.full((4,), 0.25, dtype=F64)
    for b in (0, 3):
        want = pi + PATH.signal(t)[:, None] * (torch.nn.functional.one_hot(torch.tensor(b), 4).double() - pi)
        torch.testing.assert_close(PATH.mean(b, t), want, rtol=0, atol=1e-6)


def test_sampler_means_match_the_identity_and_stay_on_the_simplex():
    """20000 positions per time, x_0 = 2: the mean of every letter within 5 standard errors of the identity; near
    t = 1 (tau = 0.0005, Griffiths' branch) the draws sit at the clean vertex."""
    n, b = 20_000, 2
    g = torch.Generator().manual_seed(0)
    pi = torch.full((4,), 0.25, dtype=F64)
    for t in (0.3, 0.9, 0.999):
        x = PATH.sample(torch.full((n, 1), b), torch.full((n,), t, dtype=F64), generator=g)[:, 0]
        assert x.shape == (n, 4) and bool(PATH.simplex.belongs(x).all())
        want = pi + PATH.signal(torch.tensor([t], dtype=F64))[0] * (torch.eye(4, dtype=F64)[b] - pi)
        se = x.std(0) / math.sqrt(n)
        assert bool(((x.mean(0) - want).abs() <= 5 * se + 1e-9).all()), (t, x.mean(0), want)
    assert float(x[:, b].mean()) > 0.99


def test_sequences_take_one_lineage_draw_per_position():
    x = PATH.sample(torch.tensor([[0, 1, 2, 3]] * 3), torch.tensor([0.5, 0.6, 0.7], dtype=F64),
                    generator=torch.Generator().manual_seed(1))  # fmt: skip
    assert x.shape == (3, 4, 4)
    assert bool((x.argmax(-1) == torch.arange(4)).double().mean() > 0.5)  # the clean letter still leads mostly


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: WrightFisherPath(1), "letters: expected an alphabet size >= 2"),
        (lambda: WrightFisherPath(4, psi=0.5), "psi: expected a mutation rate > 1"),
        (lambda: WrightFisherPath(4, t_max=1.0), "t_max: expected a paper time in"),
        (lambda: PATH.tau(torch.tensor([1.0])), "t: expected a 1-D tensor of core times in"),
        (
            lambda: PATH.sample(torch.tensor([[4]]), torch.tensor([0.5]), generator=torch.Generator()),
            "x_0: expected letters",
        ),
        (lambda: PATH.sample(torch.tensor([[1.0]]), torch.tensor([0.5]), generator=torch.Generator()), "x_0: expected"),
        (
            lambda: PATH.sample(torch.tensor([[1]]), torch.tensor([0.5, 0.6]), generator=torch.Generator()),
            "t: expected 1",
        ),
        (lambda: PATH.mean(0, torch.tensor([0.99], dtype=F64)), "t: the lineage series needs tau"),
    ],
)
def test_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()
