"""The Wright-Fisher transition density: the 2F1 recurrence against scipy, the spectral series against the lineage
mixture, the score against autograd, an empty batch, the lineage table against the series."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special
import torch

from flowlab.biology_dynamics.wright_fisher import death_process_probs, griffiths_moments, lineage_probs
from flowlab.biology_dynamics.wright_fisher.likelihood import _groups, lineage_posterior, log_ratio
from flowlab.biology_dynamics.wright_fisher.series import g_series, hyp2f1_terminating, series_score
from flowlab.biology_dynamics.wright_fisher.table import LineageTable, griffiths_pmf, griffiths_support

F64 = torch.float64


@pytest.mark.parametrize(("l", "c"), [(3.0, 1.0), (4.0, 2.0), (19.0, 1.0), (21.0, 2.0), (101.0, 1.0)])
def test_recurrence_matches_scipy_hyp2f1(l, c):
    """2F1(-n, n + l; c; x) for n <= 60 on a grid of x in [0, 1]: relative error 1e-10 (of max(1, |value|))."""
    x = torch.linspace(0, 1, 21, dtype=F64)
    ours = hyp2f1_terminating(60, l, c, x).numpy()
    ref = np.array([[scipy.special.hyp2f1(-n, n + l, c, v) for n in range(61)] for v in x.numpy()])
    assert np.max(np.abs(ours - ref) / np.maximum(1.0, np.abs(ref))) < 1e-10


@pytest.mark.parametrize(("letters", "tau"), [(4, 0.1), (4, 0.5), (4, 2.0), (20, 0.2), (20, 0.5)])
def test_spectral_series_equals_the_lineage_mixture_and_its_score(letters, tau):
    """G_b = R_b = sum_m q_m (psi)_m / (a)_m x_b^m (two exact forms of one density ratio; 1e-6 relative, the
    q_m being exact to about 1e-12 absolute); the score e^(-psi tau / 2) (psi + 1) / pi_b F_b / G_b equals
    E[m | x, b] / x_b and the autograd derivative of log R_b (1e-6)."""
    psi = float(letters)
    torch.manual_seed(letters)
    x = torch.distributions.Dirichlet(torch.ones(letters, dtype=F64)).sample((6,))
    x = torch.cat([x, torch.eye(letters, dtype=F64)[:1] * 0.9 + 0.1 / letters]).unsqueeze(0)  # near a vertex too
    q = lineage_probs(torch.tensor([tau], dtype=F64), psi)
    taus = torch.full(x.shape[1:2], tau, dtype=F64)
    g = g_series(x[0, :, 0], taus, psi, psi / letters)
    log_r, lineages = lineage_posterior(x, q, psi)
    torch.testing.assert_close(log_r[0, :, 0].exp(), g, rtol=1e-6, atol=0)
    score = series_score(x[0, :, 0], taus, psi, psi / letters)
    torch.testing.assert_close(lineages[0, :, 0] / x[0, :, 0], score, rtol=1e-6, atol=0)
    x_req = x.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(log_ratio(x_req, q, psi)[..., 0].sum(), x_req)
    torch.testing.assert_close(grad[0, :, 0], score, rtol=1e-6, atol=0)


def test_ratio_integrates_to_one_against_the_stationary_dirichlet():
    """E_{Dirichlet(psi pi)}[R_b] = 1 for a density ratio: Monte Carlo over 200000 draws, within 5 s.e."""
    letters, tau = 4, 0.5
    torch.manual_seed(0)
    x = torch.distributions.Dirichlet(torch.ones(letters, dtype=F64)).sample((200000,)).unsqueeze(1)
    q = lineage_probs(torch.tensor([tau], dtype=F64), float(letters)).expand(x.shape[0], -1)
    ratio = log_ratio(x, q, float(letters))[:, 0, 0].exp()
    assert abs(float(ratio.mean()) - 1) < 5 * float(ratio.std()) / len(ratio) ** 0.5


def test_empty_batch_gives_empty_results():
    """B = 0 sequences: no row groups, and log R and E[m | x, b] of shape (0, L, K) float64."""
    x, q = torch.full((0, 3, 4), 0.25, dtype=F64), torch.zeros(0, 81, dtype=F64)
    assert _groups(q) == []
    log_r, lineages = lineage_posterior(x, q, 4.0)
    assert log_r.shape == lineages.shape == (0, 3, 4) and log_r.dtype == lineages.dtype == F64
    assert log_ratio(x, q, 4.0).shape == (0, 3, 4)


def test_lineage_table_rows_are_distributions_and_match_the_series_between_grid_points():
    """Rows sum to 1 and are >= 0 over tau in [0.005, 3.45]; at off-grid times from 0.05 on the interpolated row is
    within total variation 5e-3 of the series (320 geometric points; measured 2.8e-3 at tau = 0.05, 1.1e-3 at
    0.137; below 0.1 the rows are the sampler's small-time branch, Griffiths at 0.01 carried by the death process);
    below 0.01 they are the rounded Griffiths law, whose mean matches Griffiths' mean to 1e-3 relative."""
    table = LineageTable(4.0, 0.005, 3.45)
    taus = torch.tensor([0.0071, 0.0093, 0.0503, 0.137, 0.31, 1.7, 3.3], dtype=F64)
    q = table.probs(taus)
    assert bool((q >= 0).all())
    torch.testing.assert_close(q.sum(-1), torch.ones(7, dtype=F64), rtol=0, atol=1e-12)
    series = lineage_probs(taus[2:], 4.0, k_max=250)
    tv = 0.5 * (q[2:, : series.shape[1]] - series).abs().sum(-1)
    assert float(tv.max()) < 5e-3, tv
    mean, _ = griffiths_moments(taus[:2], 4.0)
    m = torch.arange(q.shape[1], dtype=F64)
    torch.testing.assert_close((q[:2] * m).sum(-1), mean, rtol=1e-3, atol=0)
    # at its grid points between 0.01 and 0.1 a row is the rounded Griffiths law at 0.01 carried by the death process
    grid = table.log_grid.exp()
    inside = grid[(grid > 0.01) & (grid < 0.1)][::20]
    start = griffiths_pmf(torch.tensor([0.01], dtype=F64), 4.0, griffiths_support(0.01, 4.0))[0]
    law = death_process_probs(start, inside - 0.01, 4.0)
    width = min(law.shape[1], table.rows.shape[1])
    torch.testing.assert_close(table.probs(inside)[:, :width], law[:, :width], rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="range"):
        table.probs(torch.tensor([5.0], dtype=F64))
    with pytest.raises(ValueError, match="tau_min, tau_max"):
        LineageTable(4.0, 0.5, 0.1)
