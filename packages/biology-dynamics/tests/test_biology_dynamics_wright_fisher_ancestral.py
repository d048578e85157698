"""The ancestral-lineage distribution of the Wright-Fisher exact sampler: the series is a distribution, agrees with a
Gillespie simulation of the pure-death process (TV < 0.01 at tau in {0.05, 0.1, 0.5, 2}) and with the death
process's law carried forward by uniformisation (1e-12), Griffiths' normal approximation approaches it as tau
shrinks, and the sampler draws from it, its small-time branch included."""

from __future__ import annotations

import pytest
import torch

from flowlab.biology_dynamics.wright_fisher import (
    death_process_probs,
    griffiths_moments,
    lineage_probs,
    sample_lineages,
    simulate_lineages,
)
from flowlab.biology_dynamics.wright_fisher.table import griffiths_pmf, griffiths_support

PSI = 4.0  # DNA: psi = B = 4
F64 = torch.float64


def _tv(p: torch.Tensor, q: torch.Tensor) -> float:
    n = max(p.numel(), q.numel())
    return 0.5 * float(
        (torch.nn.functional.pad(p, (0, n - p.numel())) - torch.nn.functional.pad(q, (0, n - q.numel()))).abs().sum()
    )


def test_series_is_a_distribution():
    q = lineage_probs(torch.tensor([0.1, 0.2, 0.5, 1.0, 2.0, 5.0], dtype=F64), PSI)
    assert bool((q >= 0).all())
    torch.testing.assert_close(q.sum(-1), torch.ones(6, dtype=F64), rtol=0, atol=1e-10)
    means = (q * torch.arange(q.shape[-1], dtype=F64)).sum(-1)
    assert bool((means[1:] < means[:-1]).all())  # lineages only die


def test_plain_float64_series_fails_below_the_small_time_switch_and_matches_above_it():
    """Switching the small-time branch (and the mpmath fallback) off reproduces the cancellation failure the sampler
    avoids: at tau = 0.05 the float64 sum has negative probabilities and mass 0.14 off, at 0.02 it is garbage."""
    taus = torch.tensor([0.02, 0.05, 0.5], dtype=F64)
    plain = lineage_probs(taus, PSI, k_max=250, high_precision=False)
    exact = lineage_probs(taus[2:], PSI, k_max=250)
    assert float(plain[0].abs().max()) > 1e6 and float(plain[1].min()) < -1e-4
    assert abs(float(plain[1].sum()) - 1) > 0.01
    torch.testing.assert_close(plain[2], exact[0], rtol=0, atol=1e-12)  # no cancellation at tau = 0.5


def test_series_matches_a_gillespie_simulation_of_the_death_process():
    """2e5 lineage counts started from Griffiths' approximation at tau = 0.01 (about 200 lineages; the death process
    forgets its start within a few coalescences), run by Gillespie to tau = 0.05, 0.1, 0.5, 2 (Markov, so each leg
    continues the last): the histograms are within TV 0.01 of the series (measured at 1e6 samples from tau = 0.005:
    0.0014, 0.0015, 0.0009, 0.0001)."""
    taus = [0.05, 0.1, 0.5, 2.0]
    q = lineage_probs(torch.tensor(taus, dtype=F64), PSI, k_max=250)
    g = torch.Generator().manual_seed(0)
    k = sample_lineages(torch.full((200_000,), 0.01, dtype=F64), PSI, generator=g)
    now = 0.01
    for tau, row in zip(taus, q, strict=True):
        k = simulate_lineages(k, tau - now, PSI, generator=g)
        now = tau
        hist = torch.bincount(k).double() / k.numel()
        assert _tv(hist, row) < 0.01, (tau, _tv(hist, row))


def test_griffiths_approximation_approaches_the_series_as_tau_shrinks():
    """Measured TV to the series: 0.032, 0.022, 0.017 at tau = 0.1, 0.05, 0.03; the moments within 1 % at 0.05."""
    taus = [0.1, 0.05, 0.03]
    q = lineage_probs(torch.tensor(taus, dtype=F64), PSI, k_max=250)
    tvs = [
        _tv(griffiths_pmf(torch.tensor([t], dtype=F64), PSI, q.shape[-1] - 1)[0], row)
        for t, row in zip(taus, q, strict=True)
    ]
    assert tvs[0] > tvs[1] > tvs[2] and tvs[0] < 0.035, tvs
    m = torch.arange(q.shape[-1], dtype=F64)
    mean, var = (q[1] * m).sum(), (q[1] * m * m).sum() - (q[1] * m).sum() ** 2
    g_mean, g_var = griffiths_moments(torch.tensor([0.05], dtype=F64), PSI)
    assert abs(float(g_mean) / float(mean) - 1) < 0.01 and abs(float(g_var) / float(var) - 1) < 0.02


def test_sampler_draws_from_the_series_and_is_seeded():
    tau = torch.full((100_000,), 0.5, dtype=F64)
    draws = sample_lineages(tau, PSI, generator=torch.Generator().manual_seed(1))
    q = lineage_probs(torch.tensor([0.5], dtype=F64), PSI)[0]
    assert _tv(torch.bincount(draws).double() / draws.numel(), q) < 0.01
    again = sample_lineages(tau[:50], PSI, generator=torch.Generator().manual_seed(1))
    assert torch.equal(again, draws[:50])
    small = sample_lineages(torch.full((20_000,), 0.005, dtype=F64), PSI, generator=torch.Generator().manual_seed(2))
    mean, var = griffiths_moments(torch.tensor([0.005], dtype=F64), PSI)
    assert abs(float(small.double().mean()) - float(mean)) < 5 * float(var.sqrt()) / 20_000**0.5 + 0.5


def test_small_time_branch_meets_the_series_where_griffiths_alone_does_not():
    """Below tau = 0.1 the sampler draws Griffiths at tau = 0.01 and runs the death process from there. Its exact law
    (`death_process_probs` from the rounded Griffiths law) is within TV 0.002 of the series at tau = 0.05 and 0.07
    (measured 7e-4 at 0.05, 3e-4 at 0.1) where Griffiths at tau itself is 0.02 off; 200k draws of the sampler are
    within TV 0.01 of it (the sampling floor is about 0.005)."""
    taus = torch.tensor([0.05, 0.07], dtype=F64)
    series = lineage_probs(taus, PSI, k_max=250)
    start = griffiths_pmf(torch.tensor([0.01], dtype=F64), PSI, griffiths_support(0.01, PSI))[0]
    law = death_process_probs(start, taus - 0.01, PSI)
    for row, exact, tau in zip(law, series, taus, strict=True):
        assert _tv(row, exact) < 2e-3, _tv(row, exact)
        assert _tv(griffiths_pmf(tau[None], PSI, exact.numel() - 1)[0], exact) > 0.015
    draws = sample_lineages(torch.full((200_000,), 0.05, dtype=F64), PSI, generator=torch.Generator().manual_seed(3))
    assert _tv(torch.bincount(draws).double() / draws.numel(), series[0]) < 0.01


def test_death_process_law_is_exact_on_hand_cases_and_carries_the_series_forward():
    """From one lineage the law after d is (1 - e^(-l1 d), e^(-l1 d)), from two the middle state holds
    l2 / (l2 - l1) (e^(-l1 d) - e^(-l2 d)), l_k = k (k + psi - 1) / 2; the series at tau = 0.2 carried by 0.3 and
    0.8 is the series at 0.5 and 1.0 (the lineage law is the death process's from infinitely many) to 1e-12; a zero
    duration returns the start; psi = 1.5 (a top rate below 1) and a single-state start are handled."""
    d = torch.tensor([0.0, 0.3, 1.7], dtype=F64)
    l1, l2 = PSI / 2, 2 * (1 + PSI) / 2
    one = death_process_probs(torch.tensor([0.0, 1.0], dtype=F64), d, PSI)
    torch.testing.assert_close(one[:, 1], torch.exp(-l1 * d), rtol=0, atol=1e-13)
    two = death_process_probs(torch.tensor([0.0, 0.0, 1.0], dtype=F64), d, PSI)
    middle = l2 / (l2 - l1) * (torch.exp(-l1 * d) - torch.exp(-l2 * d))
    torch.testing.assert_close(two[:, 1], middle, rtol=0, atol=1e-13)
    torch.testing.assert_close(two.sum(-1), torch.ones(3, dtype=F64), rtol=0, atol=1e-13)
    q = lineage_probs(torch.tensor([0.2, 0.5, 1.0], dtype=F64), PSI)
    carried = death_process_probs(q[0], torch.tensor([0.0, 0.3, 0.8], dtype=F64), PSI)
    torch.testing.assert_close(carried, q, rtol=0, atol=1e-12)
    slow = death_process_probs(torch.tensor([0.0, 1.0], dtype=F64), d, 1.5)  # l1 = 0.75
    torch.testing.assert_close(slow[:, 1], torch.exp(-0.75 * d), rtol=0, atol=1e-13)
    alone = death_process_probs(torch.tensor([1.0], dtype=F64), d, PSI)
    torch.testing.assert_close(alone, torch.ones(3, 1, dtype=F64), rtol=0, atol=0)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: lineage_probs(torch.tensor([0.5], dtype=F64), 1.0), "psi: expected a mutation rate > 1"),
        (lambda: lineage_probs(torch.tensor([0.0], dtype=F64), PSI), "tau: expected finite times > 0"),
        (lambda: lineage_probs(torch.tensor([[0.5]], dtype=F64), PSI), "tau: expected a 1-D float tensor"),
        (lambda: lineage_probs(torch.tensor([0.5], dtype=F64), PSI, k_max=0), "k_max: expected an int >= 1"),
        (lambda: lineage_probs(torch.tensor([0.01], dtype=F64), PSI), "tau: the series truncated at k_max=80"),
        (lambda: sample_lineages(torch.tensor([0.5], dtype=F64), PSI, generator=0), "generator: expected"),
        (lambda: simulate_lineages(torch.tensor([-1]), 0.1, PSI, generator=torch.Generator()), "start: expected"),
        (lambda: simulate_lineages(torch.tensor([3]), -0.1, PSI, generator=torch.Generator()), "duration: expected"),
        (lambda: death_process_probs(torch.tensor([0.5, -0.1]), torch.tensor([0.1]), PSI), "start: expected"),
        (lambda: death_process_probs(torch.tensor([0.5, torch.nan]), torch.tensor([0.1]), PSI), "start: expected"),
        (lambda: death_process_probs(torch.tensor([]), torch.tensor([0.1]), PSI), "start: expected a non-empty"),
        (lambda: death_process_probs(torch.tensor([0.5, 0.5]), torch.tensor([-0.1]), PSI), "duration: expected"),
        (lambda: death_process_probs(torch.tensor([0.5, 0.5]), torch.tensor([0.1]), 0.5), "psi: expected"),
    ],
)
def test_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()
