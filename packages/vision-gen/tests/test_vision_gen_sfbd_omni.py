"""SFBD-OMNI: the closed-form Gaussian/linear iteration (exact recovery when injective, a stuck null space
otherwise, clean mixing restoring it), the finite-space posterior and iteration (Bayes by enumeration, the EM
descent, the online rate), the learned loop (shapes, round resume, the identity posterior, the first-round noise
level on a Gaussian toy) and clear errors."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from flowlab.vision_gen.kit.corruptions import AvgPool, GaussianNoise, PixelMask
from flowlab.vision_gen.sfbd_omni import (
    SFBDConfig,
    ambient_lite,
    ambient_sample,
    discrete_iteration,
    discrete_posterior,
    gaussian_closed_form_iteration,
    kl_divergence,
    reconstruct,
    sfbd_omni,
)
from flowlab.vision_gen.sfbd_omni.closed_form import mixture_moments

F64 = torch.float64


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _spd(d: int, g: torch.Generator) -> torch.Tensor:
    a = torch.randn(d, d, generator=g, dtype=F64)
    return a @ a.T / d + 0.5 * torch.eye(d, dtype=F64)


def _truth(d: int, seed: int):
    g = _gen(seed)
    return torch.randn(d, generator=g, dtype=F64), _spd(d, g), g


def _data_moments(m, S, A, Gamma):
    return A @ m, A @ S @ A.T + Gamma


# ---------------------------------------------------------------- closed form


@pytest.mark.parametrize("kind", ["identity", "random"])
def test_gaussian_iteration_recovers_the_truth_for_an_injective_map(kind):
    d = 5
    m_true, S_true, g = _truth(d, 0)
    A = torch.eye(d, dtype=F64) if kind == "identity" else torch.randn(d + 2, d, generator=g, dtype=F64)
    Gamma = 0.3 * torch.eye(A.shape[0], dtype=F64)
    m_q, S_q = _data_moments(m_true, S_true, A, Gamma)
    m, S = gaussian_closed_form_iteration(torch.zeros(d, dtype=F64), torch.eye(d, dtype=F64), A, Gamma, m_q, S_q,
                                          steps=3000)  # fmt: skip
    assert float((m - m_true).abs().max()) < 1e-10
    assert float((S - S_true).abs().max()) < 1e-10


def test_gaussian_iteration_stays_wrong_in_the_null_space_and_clean_mixing_restores_it():
    d, keep = 4, 2
    m_true, S_true, g = _truth(d, 1)
    A = torch.eye(d, dtype=F64)[:keep]  # a projection: the last two coordinates are never observed
    Gamma = 0.1 * torch.eye(keep, dtype=F64)
    m_q, S_q = _data_moments(m_true, S_true, A, Gamma)
    m0, S0 = torch.zeros(d, dtype=F64), torch.eye(d, dtype=F64)
    start_error = float((m0[keep:] - m_true[keep:]).norm())
    m, _ = gaussian_closed_form_iteration(m0, S0, A, Gamma, m_q, S_q, steps=2000)
    assert float((m[:keep] - m_true[:keep]).abs().max()) < 1e-8  # the observed part is recovered
    assert float((m[keep:] - m_true[keep:]).norm()) >= start_error - 1e-9  # the null space never moves toward it
    # lambda > 0 with h = 20 samples of the truth: the null-space error falls to the order of h's own sample error
    h = m_true + torch.randn(20, d, generator=g, dtype=F64) @ torch.linalg.cholesky(S_true).T
    clean = (h.mean(0), torch.cov(h.T))
    m_mix, _ = gaussian_closed_form_iteration(m0, S0, A, Gamma, m_q, S_q, steps=2000, clean_weight=1 / 6,
                                              clean_moments=clean)  # fmt: skip
    mixed_error = float((m_mix[keep:] - m_true[keep:]).norm())
    sample_error = float((clean[0][keep:] - m_true[keep:]).norm())
    assert mixed_error < 0.5 * start_error
    assert mixed_error < 3 * sample_error + 0.1


def test_mixture_moments_match_a_sampled_mixture():
    g = _gen(2)
    m_a, m_b = torch.tensor([0.0, 1.0], dtype=F64), torch.tensor([2.0, -1.0], dtype=F64)
    S_a, S_b = _spd(2, g), _spd(2, g)
    n, w = 200_000, 0.3
    pick = torch.rand(n, generator=g, dtype=F64) < w
    a = m_a + torch.randn(n, 2, generator=g, dtype=F64) @ torch.linalg.cholesky(S_a).T
    b = m_b + torch.randn(n, 2, generator=g, dtype=F64) @ torch.linalg.cholesky(S_b).T
    x = torch.where(pick[:, None], b, a)
    m, S = mixture_moments(m_a, S_a, m_b, S_b, w)
    torch.testing.assert_close(x.mean(0), m, atol=0.02, rtol=0)
    torch.testing.assert_close(torch.cov(x.T), S, atol=0.03, rtol=0)


# ---------------------------------------------------------------- finite spaces


def _channel(g: torch.Generator, outcomes: int, states: int) -> torch.Tensor:
    r = torch.rand(outcomes, states, generator=g, dtype=F64) + 0.05
    return r / r.sum(0)


def test_discrete_posterior_is_bayes_rule_by_enumeration():
    g = _gen(3)
    p = torch.softmax(torch.randn(5, generator=g, dtype=F64), 0)
    r = _channel(g, 7, 5)
    y = torch.tensor([0, 3, 6, 3])
    u = discrete_posterior(p, r, y)
    for b, yb in enumerate(y.tolist()):
        evidence = sum(float(p[x]) * float(r[yb, x]) for x in range(5))
        for x in range(5):
            assert float(u[b, x]) == pytest.approx(float(p[x]) * float(r[yb, x]) / evidence, rel=1e-12)


def test_alternating_iteration_descends_and_the_online_rate_holds():
    """gamma = 1 is EM: KL(q || T_r p^k) never increases and an injective channel is inverted; the online iteration
    obeys min_k KL(q || T_r p^k) <= KL(p* || p^0) / (gamma K)."""
    g = _gen(4)
    truth = torch.softmax(2 * torch.randn(6, generator=g, dtype=F64), 0)
    r = _channel(g, 9, 6)  # 9 outcomes, 6 states: full column rank, so T_r is injective
    q = r @ truth
    p0 = torch.full((6,), 1 / 6, dtype=F64)
    history = discrete_iteration(p0, r, q, steps=400)
    kls = [kl_divergence(q, r @ p) for p in history]
    assert all(b <= a + 1e-12 for a, b in itertools.pairwise(kls))
    assert kls[-1] < 1e-3 * kls[0]
    for gamma in (0.05, 0.3, 1.0):
        online = discrete_iteration(p0, r, q, steps=200, gamma=gamma)
        for k in (10, 50, 200):
            best = min(kl_divergence(q, r @ p) for p in online[1 : k + 1])
            assert best <= kl_divergence(truth, p0) / (gamma * k) + 1e-12, (gamma, k)


def test_discrete_clean_mixing_moves_the_fixed_point_toward_h():
    """A channel that merges two states (not injective): without clean data the split between them stays where p^0
    put it; mixing h in moves it to h's split."""
    r = torch.tensor([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]], dtype=F64)  # states 0 and 1 give the same outcome
    truth = torch.tensor([0.6, 0.1, 0.3], dtype=F64)
    q = r @ truth
    p0 = torch.full((3,), 1 / 3, dtype=F64)
    plain = discrete_iteration(p0, r, q, steps=300)[-1]
    assert float(plain[0] / plain[1]) == pytest.approx(1.0, rel=1e-9)  # the null direction never moves
    mixed = discrete_iteration(p0, r, q, steps=300, clean=truth, clean_weight=0.2)[-1]
    assert float(mixed[0] / mixed[1]) == pytest.approx(6.0, rel=1e-6)


# ---------------------------------------------------------------- the learned loop


def _tiny(**kw) -> SFBDConfig:
    base = dict(rounds=2, pretrain_steps=20, steps_per_round=10, batch_size=32, hidden=(32,), sampler_steps=5)
    return SFBDConfig(**{**base, **kw})


def _digits_like(n: int, seed: int) -> torch.Tensor:
    return torch.rand(n, 1, 4, 4, generator=_gen(seed)) * 2 - 1


def test_loop_shapes_weights_and_round_resume(tmp_path):
    clean, truth = _digits_like(8, 5), _digits_like(40, 6)
    for corruption, weight in ((GaussianNoise(0.3), 0.0), (AvgPool(2), 0.2), (PixelMask(0.5), 0.0)):
        y = corruption.sample(truth, generator=_gen(7))
        out = sfbd_omni(y, clean, corruption, _tiny())
        assert out.clean_weight == weight
        assert len(out.pools) == 3 and all(p.shape == truth.shape for p in out.pools)
    y = GaussianNoise(0.3).sample(truth, generator=_gen(7))
    whole = sfbd_omni(y, clean, GaussianNoise(0.3), _tiny())
    seen = []
    sfbd_omni(y, clean, GaussianNoise(0.3), _tiny(rounds=1), ckpt_dir=tmp_path)
    resumed = sfbd_omni(y, clean, GaussianNoise(0.3), _tiny(), ckpt_dir=tmp_path, callback=lambda k, p: seen.append(k))
    assert seen == [2]  # rounds 0 and 1 were read back, not rerun
    for a, b in zip(whole.pools, resumed.pools, strict=True):
        torch.testing.assert_close(a, b)


class _CountingNoise(GaussianNoise):
    """Gaussian noise that records the images it corrupts."""

    def __init__(self, sigma: float) -> None:
        super().__init__(sigma)
        self.seen: list[torch.Tensor] = []

    def sample(self, x, *, generator=None):
        self.seen.append(x.detach().clone())
        return super().sample(x, generator=generator)


def test_every_training_batch_is_corrupted_afresh():
    """One fresh corruption per optimiser step, of the batch actually trained on (never a stale y): the pretraining
    batches come from the clean set, the later ones include reconstructions (not in the clean set)."""
    clean, truth = _digits_like(8, 18), _digits_like(30, 19)
    noise = _CountingNoise(0.3)
    y = GaussianNoise(0.3).sample(truth, generator=_gen(20))
    sfbd_omni(y, clean, noise, _tiny(pretrain_steps=5, steps_per_round=3, rounds=2))
    assert len(noise.seen) == 5 + 2 * 3
    flat = clean.flatten(1)
    in_clean = [
        bool((torch.cdist(b.flatten(1), flat, compute_mode="donot_use_mm_for_euclid_dist").min(1).values < 1e-6).all())
        for b in noise.seen
    ]
    assert all(in_clean[:5]) and not any(in_clean[5:])


def test_online_variant_refreshes_a_share_of_the_pool():
    clean, truth = _digits_like(8, 8), _digits_like(200, 9)
    y = GaussianNoise(0.3).sample(truth, generator=_gen(10))
    out = sfbd_omni(y, clean, GaussianNoise(0.3), _tiny(online_gamma=0.1, refreshes_per_round=2, rounds=1))
    changed = (out.pools[1] != out.pools[0]).flatten(1).any(1).float().mean()
    assert out.clean_weight == 0.2
    assert 0.1 <= float(changed) <= 0.2 + 1e-9  # two refreshes of 10 %, possibly overlapping


def test_identity_corruption_gives_the_identity_posterior():
    """With y = x (noise-free identity) the posterior is a point mass at y: the learned bridge returns y."""
    clean = _digits_like(64, 11)
    y = _digits_like(32, 12)
    cfg = _tiny(rounds=0, pretrain_steps=400, hidden=(64, 64), lr=2e-3, sigma=0.05, source_noise=0.0)
    out = sfbd_omni(y, clean, GaussianNoise(0.0), cfg)
    err = (out.pools[0] - y).abs().mean()
    assert float(err) < 0.05, float(err)


def test_ambient_lite_fills_in_pixels_it_never_saw_together():
    """Every training image is the same pattern seen through a fresh half mask; the ambient generator, never shown a
    whole image and scored only on observed pixels, samples the whole pattern."""
    pattern = _digits_like(1, 16)
    mask = PixelMask(0.5)
    y = mask.sample(pattern.expand(512, -1, -1, -1), generator=_gen(17))
    cfg = _tiny(rounds=0, pretrain_steps=300, hidden=(64, 64), lr=3e-3)
    net = ambient_lite(y, mask, cfg)
    samples = ambient_sample(net, 64, mask, steps=10, seed=1)
    assert samples.shape == (64, 1, 4, 4)
    err = float((samples - pattern).abs().mean())
    assert err < 0.15, err
    with pytest.raises(ValueError, match="corruption"):
        ambient_lite(y[:, :1], PixelMask(0.5, reveal_mask=False), cfg)


@pytest.mark.parametrize(
    ("steps", "rel"), [(800, 0.3), pytest.param(3000, 0.15, marks=pytest.mark.slow)], ids=["quick", "full"]
)
def test_first_round_posterior_has_the_gaussian_noise_level(steps, rel):
    """The SFBD special case on a Gaussian toy (2-pixel images, x ~ N(m, S), y = x + 0.5 e): after pretraining on
    clean samples the reconstructions' spread around E[x | y] matches the closed-form posterior covariance
    (I - K) S, K = S (S + 0.25 I)^-1, per coordinate within `rel` (30 % after 800 steps, 15 % after 3000)."""
    g = _gen(13)
    m, S = torch.tensor([0.3, -0.2]), torch.tensor([[0.25, 0.1], [0.1, 0.15]])
    L = torch.linalg.cholesky(S)
    clean = (m + torch.randn(4000, 2, generator=g) @ L.T).view(-1, 1, 1, 2)
    truth = (m + torch.randn(3000, 2, generator=g) @ L.T).view(-1, 1, 1, 2)
    noise = GaussianNoise(0.5)
    y = noise.sample(truth, generator=g)
    cfg = SFBDConfig(rounds=0, pretrain_steps=steps, batch_size=256, hidden=(128, 128), lr=2e-3, sigma=0.3,
                     sampler_steps=40)  # fmt: skip
    out = sfbd_omni(y, clean, noise, cfg)
    K = S @ torch.linalg.inv(S + 0.25 * torch.eye(2))
    posterior_cov = (torch.eye(2) - K) @ S
    mean = m + (y.view(-1, 2) - m) @ K.T
    spread = torch.cov((out.pools[0].view(-1, 2) - mean).T)
    for i in range(2):
        assert float(spread[i, i]) == pytest.approx(float(posterior_cov[i, i]), rel=rel)


def test_bad_input_names_the_argument():
    clean, truth = _digits_like(8, 14), _digits_like(20, 15)
    y = PixelMask(0.5).sample(truth)
    cases = [
        ("y", lambda: sfbd_omni(y[:, :1], clean, PixelMask(0.5), _tiny())),
        ("y", lambda: sfbd_omni(y[:0], clean, PixelMask(0.5), _tiny())),
        ("y", lambda: sfbd_omni(y * math.nan, clean, PixelMask(0.5), _tiny())),
        ("clean", lambda: sfbd_omni(y, clean[:, 0], PixelMask(0.5), _tiny())),
        ("corruption", lambda: sfbd_omni(y, clean, "mask", _tiny())),
        ("device", lambda: sfbd_omni(y, clean, PixelMask(0.5), _tiny(), device="tpu")),
        ("clean_weight", lambda: _tiny(clean_weight=1.0)),
        ("online_gamma", lambda: _tiny(online_gamma=0.0)),
        ("rounds", lambda: _tiny(rounds=-1)),
        ("sigma", lambda: _tiny(sigma=0.0)),
        (
            "r",
            lambda: discrete_posterior(
                torch.tensor([0.5, 0.5], dtype=F64), torch.ones(3, 2, dtype=F64), torch.tensor([0])
            ),
        ),
        (
            "A",
            lambda: gaussian_closed_form_iteration(
                torch.zeros(2), torch.eye(2), torch.eye(3), torch.eye(3), torch.zeros(3), torch.eye(3), steps=1
            ),
        ),
        (
            "obs",
            lambda: reconstruct(
                sfbd_omni(y, clean, PixelMask(0.5), _tiny(rounds=0, pretrain_steps=1)).model,
                y[:, :1],
                AvgPool(1),
                _tiny(),
                generator=_gen(0),
            ),
        ),
    ]
    for name, call in cases:
        with pytest.raises(ValueError, match=name):
            call()


@pytest.mark.slow
def test_quick_scale_digits_restore_gaussian_noise_better_than_the_corrupted_data():
    """The quick scenario's Gaussian-noise case (sigma 0.3, 50 clean, 4 rounds of 500 steps): the round-4
    reconstructions have a lower digits-FD against the test split than the noisy observations themselves."""
    from flowlab.vision_gen.sfbd_omni import distribution_measures
    from flowlab.vision_gen.sfbd_omni.data import corrupted_digits

    noise = GaussianNoise(0.3)
    data = corrupted_digits(noise, clean_count=50, seed=0)
    out = sfbd_omni(data.y, data.clean, noise, SFBDConfig())
    ours = distribution_measures(out.pools[-1], data.reference)["fd"]
    corrupted = distribution_measures(data.y, data.reference)["fd"]
    assert ours < corrupted, (ours, corrupted)
