"""WT-ASBS analysis: reweighting, Delta F from weighted samples, torsion-marginal KL and W2 on the torus."""

from __future__ import annotations

import math

import pytest
import torch

from flowlab.molecular.wt_asbs import delta_f_from_samples, reweight, torsion_marginal_kl, torsion_w2


def test_reweighting_recovers_the_unbiased_expectation():
    """Samples from exp(-(E + V)) weighted by exp(V) reproduce E_p[f] of exp(-E) on a 1-D double well (3 s.e.)."""
    g = torch.Generator().manual_seed(6)
    s = torch.linspace(-3, 3, 6001, dtype=torch.float64)
    energy = 2.0 * (s**2 - 1) ** 2 + 0.8 * s
    vbias = 1.5 * torch.exp(-((s + 1) ** 2) / 0.5)  # a bias flattening the deeper well
    f = (s > 0).to(torch.float64)  # probability of the right well
    truth = float((torch.softmax(-energy, 0) * f).sum())
    n = 20000
    idx = torch.multinomial(torch.softmax(-(energy + vbias), 0), n, replacement=True, generator=g)
    w = reweight(vbias[idx], 1.0)
    est = float((w * f[idx]).sum())
    ess = 1.0 / float((w**2).sum())
    se = math.sqrt(truth * (1 - truth) / ess)
    assert abs(est - truth) < 3 * se
    df = delta_f_from_samples(s[idx], (-3, 0), (0, 3), weights=w)
    assert df == pytest.approx(-math.log(truth / (1 - truth)), abs=3 * se / (truth * (1 - truth)))


def test_torsion_distances_wrap_and_match_hand_values():
    """W2 on the torus takes the short way across +-pi; marginal KL of a reference in one bin against samples split
    over two bins is ln 2; identical weighted sets give 0."""
    ref, s = torch.tensor([[-3.0, 0.5]]), torch.tensor([[3.0, 0.5]])
    assert torsion_w2(ref, s) == pytest.approx(2 * math.pi - 6.0, abs=1e-9)
    ref = torch.tensor([[0.01, 1.0], [0.02, 1.0]])
    s = torch.tensor([[0.01, 1.0], [0.01 + 2 * math.pi / 36, 1.0], [0.03, 1.0]])
    kl = torsion_marginal_kl(ref, s, weights=torch.tensor([1.0, 2.0, 1.0]))
    assert float(kl[0]) == pytest.approx(math.log(2), abs=1e-4) and float(kl[1]) == pytest.approx(0.0, abs=1e-9)
    g = torch.Generator().manual_seed(0)
    x, w = torch.rand(50, 2, generator=g) * 6 - 3, torch.rand(50, generator=g)
    assert float(torsion_marginal_kl(x, x, ref_weights=w, weights=w).abs().max()) < 1e-12
    assert torsion_w2(x, x, ref_weights=w, weights=w) == pytest.approx(0.0, abs=1e-6)
    with pytest.raises(ValueError, match="weights"):
        torsion_w2(x, x, weights=-w)
