"""Discrete mixture paths, the CTMC sampler and the masked- and uniform-diffusion losses against exact marginals and
NELBOs.

Statistical checks are binomial: a frequency estimated from N independent tokens must lie within 5 standard errors
sqrt(p (1 - p) / N) of its exact value (fixed seeds).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from flowlab.core import grids
from flowlab.core.losses.discrete import masked_diffusion_loss, uniform_diffusion_loss
from flowlab.core.paths.base import DiscretePathSample
from flowlab.core.paths.discrete import LinearSigmaKappa, LogLinearKappa, MaskedDiscretePath, UniformDiscretePath
from flowlab.core.schedules import CondOT, Cosine
from flowlab.core.solvers.ctmc import ctmc_step, jump_probabilities, solve_ctmc
from flowlab.core.solvers.trajectory import Trajectory

V = 4
MASK = V
P_DATA = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64)


def assert_binomial(count, n, p, what=""):
    """|count / n - p| <= 5 sqrt(p (1 - p) / n) (exact zero when p is 0 or 1)."""
    freq, p = float(count) / n, float(p)
    bound = 5 * math.sqrt(p * (1 - p) / n)
    assert abs(freq - p) <= bound + 1e-12, f"{what}: frequency {freq:.4f}, expected {p:.4f} +- {bound:.4f}"


def data_tokens(shape, seed):
    gen = torch.Generator().manual_seed(seed)
    return torch.multinomial(P_DATA.float(), math.prod(shape), replacement=True, generator=gen).reshape(shape)


# -------------------------------------------------------------------------------------------------------- paths


@pytest.mark.parametrize("kappa", [CondOT(), Cosine()])
def test_masked_path_marginal_is_kappa(kappa):
    path = MaskedDiscretePath(kappa, mask_id=MASK)
    t = torch.tensor([0.1, 0.5, 0.9])
    x_1 = data_tokens((3, 20_000), seed=0)
    x_0 = path.sample_source(x_1.shape)
    s = path.sample(x_0, x_1, t, generator=torch.Generator().manual_seed(1))
    assert isinstance(s, DiscretePathSample) and s.x_t.shape == x_1.shape and s.x_t.dtype == torch.long
    kept = s.x_t != MASK
    assert bool((s.x_t[kept] == x_1[kept]).all())
    for row, k in enumerate(kappa(t).alpha):
        assert_binomial(kept[row].sum(), x_1.shape[1], k, f"unmasked fraction at t={float(t[row])}")


def test_path_endpoints():
    path = MaskedDiscretePath(CondOT(), mask_id=MASK)
    x_1 = data_tokens((2, 50), seed=2)
    s = path.sample(path.sample_source(x_1.shape), x_1, torch.tensor([0.0, 1.0]))
    assert bool((s.x_t[0] == MASK).all()) and bool((s.x_t[1] == x_1[1]).all())


def test_uniform_path_marginal_is_kappa():
    path = UniformDiscretePath(Cosine(), vocab_size=V)
    t = torch.tensor([0.2, 0.6])
    x_1 = data_tokens((2, 20_000), seed=3)
    x_0 = (x_1 + 1 + path.sample_source(x_1.shape, generator=torch.Generator().manual_seed(4)) % (V - 1)) % V
    assert bool((x_0 != x_1).all())
    s = path.sample(x_0, x_1, t, generator=torch.Generator().manual_seed(5))
    assert bool(((s.x_t == x_1) | (s.x_t == x_0)).all())
    for row, k in enumerate(Cosine()(t).alpha):
        assert_binomial((s.x_t[row] == x_1[row]).sum(), x_1.shape[1], k, f"data fraction at t={float(t[row])}")


def test_uniform_source_is_uniform():
    x = UniformDiscretePath(CondOT(), vocab_size=V).sample_source(
        (10, 4000), generator=torch.Generator().manual_seed(6)
    )
    for v in range(V):
        assert_binomial((x == v).sum(), x.numel(), 1 / V, f"token {v}")


def test_log_linear_kappa_is_mdlm_noise():
    """kappa_t = exp(-sigma(1 - t)) with MDLM's log-linear sigma(tau) = -log(1 - (1 - eps) tau)."""
    eps = 1e-3
    kappa = LogLinearKappa(eps)
    t = torch.linspace(0, 0.99, 23, dtype=torch.float64)
    tau = 1 - t
    sigma = -torch.log1p(-(1 - eps) * tau)
    d_sigma = (1 - eps) / (1 - (1 - eps) * tau)
    out = kappa(t)
    torch.testing.assert_close(out.alpha, torch.exp(-sigma))
    # loss weight kappa' / (1 - kappa) equals MDLM's sigma'(tau) / expm1(sigma(tau))
    torch.testing.assert_close(out.d_alpha / (1 - out.alpha), d_sigma / torch.expm1(sigma))
    torch.testing.assert_close(kappa.snr_inverse(kappa.snr(t[1:])), t[1:])


def test_linear_sigma_kappa_is_mdlm_linear_noise():
    """kappa_t = exp(-sigma(1 - t)) with MDLM's linear sigma(tau) = sigma_min + tau (sigma_max - sigma_min)."""
    lo, hi = 1e-3, 7.0
    kappa = LinearSigmaKappa(lo, hi)
    t = torch.linspace(0, 1, 23, dtype=torch.float64)
    sigma = lo + (1 - t) * (hi - lo)
    out = kappa(t)
    torch.testing.assert_close(out.alpha, torch.exp(-sigma))
    torch.testing.assert_close(out.sigma, -torch.expm1(-sigma))
    torch.testing.assert_close(out.d_alpha / out.sigma, (hi - lo) / torch.expm1(sigma))  # sigma' / expm1(sigma)
    assert float(out.alpha[0]) == pytest.approx(math.exp(-hi)) and float(out.alpha[-1]) == pytest.approx(math.exp(-lo))
    torch.testing.assert_close(kappa.snr_inverse(kappa.snr(t)), t)
    path = MaskedDiscretePath(kappa, mask_id=MASK)
    torch.testing.assert_close(path.kappa_inverse(path.kappa_at(t)[0]), t)
    with pytest.raises(ValueError, match="sigma_min, sigma_max"):
        LinearSigmaKappa(7.0, 1.0)


# ---------------------------------------------------------------------------------------------------------- CTMC


def masked_posterior(x, t):
    """Exact p(x_1 | x_t) for independent tokens: the data law at masks, the token itself elsewhere. The mask
    token gets a large logit that the sampler must ignore."""
    logits = torch.full((*x.shape, V + 1), -30.0, dtype=torch.float64, device=x.device)
    logits[..., :V] = torch.log(P_DATA).to(x.device)
    logits[..., MASK] = 10.0
    known = x != MASK
    logits[known] = -30.0
    logits[known, x[known]] = 0.0
    return logits


def uniform_posterior_for(kappa):
    def posterior(x, t):
        """p(x_1 = v | x_t = u) proportional to p(v) (kappa delta_uv + (1 - kappa) / V)."""
        k = kappa(t.to(torch.float64)).alpha[:, None, None]
        like = k * torch.nn.functional.one_hot(x, V).to(torch.float64) + (1 - k) / V
        return torch.log(P_DATA * like)

    return posterior


def test_ctmc_masked_marginals_match_the_path():
    kappa = Cosine()
    path = MaskedDiscretePath(kappa, mask_id=MASK)
    grid = grids.uniform(6, dtype=torch.float64) ** 1.5  # non-uniform steps
    x_init = path.sample_source((200, 50))
    traj = solve_ctmc(
        masked_posterior, path, x_init, grid, generator=torch.Generator().manual_seed(7), return_trajectory=True
    )
    assert isinstance(traj, Trajectory) and traj.states.shape == (7, 200, 50)
    n = x_init.numel()
    for t, x, k in zip(grid, traj.states, kappa(grid).alpha, strict=True):
        assert_binomial((x == MASK).sum(), n, 1 - k, f"masks at t={float(t):.3f}")
        for v in range(V):
            assert_binomial((x == v).sum(), n, k * P_DATA[v], f"token {v} at t={float(t):.3f}")
    # unmasked tokens never change
    for a, b in zip(traj.states[:-1], traj.states[1:], strict=True):
        assert bool((b[a != MASK] == a[a != MASK]).all())


def test_ctmc_uniform_marginals_match_the_path():
    kappa = Cosine()
    path = UniformDiscretePath(kappa, vocab_size=V)
    grid = grids.uniform(5, dtype=torch.float64)
    x_init = path.sample_source((200, 50), generator=torch.Generator().manual_seed(8))
    traj = solve_ctmc(
        uniform_posterior_for(kappa),
        path,
        x_init,
        grid,
        generator=torch.Generator().manual_seed(9),
        return_trajectory=True,
    )
    n = x_init.numel()
    for t, x, k in zip(grid, traj.states, kappa(grid).alpha, strict=True):
        for v in range(V):
            assert_binomial((x == v).sum(), n, k * P_DATA[v] + (1 - k) / V, f"token {v} at t={float(t):.3f}")


def test_ctmc_keeps_a_prompt_and_knobs_sharpen():
    path = MaskedDiscretePath(CondOT(), mask_id=MASK)
    x_init = path.sample_source((20, 30))
    x_init[:, :5] = 1
    gen = torch.Generator().manual_seed(10)
    out = solve_ctmc(masked_posterior, path, x_init, grids.uniform(4), generator=gen)
    assert bool((out[:, :5] == 1).all()) and not bool((out == MASK).any())
    # top_p below the top probability (0.4) and a tiny temperature both keep only the most likely token
    for knobs in ({"top_p": 0.35}, {"temperature": 1e-3}):
        out = solve_ctmc(masked_posterior, path, x_init, grids.uniform(4), generator=gen, **knobs)
        assert bool((out[:, 5:] == 3).all())
    # top_p 0.65 keeps tokens 3 and 2 (0.4 + 0.3 >= 0.65)
    out = solve_ctmc(masked_posterior, path, x_init, grids.uniform(4), generator=gen, top_p=0.65)
    assert set(out[:, 5:].unique().tolist()) == {2, 3}


def test_ctmc_is_reproducible_with_a_generator():
    path = UniformDiscretePath(CondOT(), vocab_size=V)
    x_init = path.sample_source((4, 16), generator=torch.Generator().manual_seed(11))
    posterior = uniform_posterior_for(CondOT())
    a = solve_ctmc(posterior, path, x_init, grids.uniform(8), generator=torch.Generator().manual_seed(12))
    b = solve_ctmc(posterior, path, x_init, grids.uniform(8), generator=torch.Generator().manual_seed(12))
    assert torch.equal(a, b)


@pytest.mark.parametrize("kind", ["masked", "uniform"])
def test_solve_ctmc_is_a_loop_of_ctmc_step(kind):
    """With the same generator, solve_ctmc's states equal a hand-written loop of ctmc_step bit for bit."""
    kappa = Cosine()
    if kind == "masked":
        path, posterior = MaskedDiscretePath(kappa, mask_id=MASK), masked_posterior
        x_init = path.sample_source((6, 40))
    else:
        path, posterior = UniformDiscretePath(kappa, vocab_size=V), uniform_posterior_for(kappa)
        x_init = path.sample_source((6, 40), generator=torch.Generator().manual_seed(3))
    grid, knobs = grids.uniform(7), {"temperature": 0.8, "top_p": 0.9}
    traj = solve_ctmc(
        posterior, path, x_init, grid, generator=torch.Generator().manual_seed(4), return_trajectory=True, **knobs
    )
    gen, x, states = torch.Generator().manual_seed(4), x_init, [x_init]
    jump = jump_probabilities(path, grid)
    for i in range(len(grid) - 1):
        x = ctmc_step(path, x, posterior(x=x, t=grid[i].expand(len(x))), jump[i], generator=gen, **knobs)
        states.append(x)
    assert torch.equal(traj.states, torch.stack(states))


@pytest.mark.parametrize("kind", ["masked", "uniform"])
def test_ctmc_step_never_jumps_to_a_disallowed_token(kind):
    gen = torch.Generator().manual_seed(5)
    path = MaskedDiscretePath(CondOT(), mask_id=MASK) if kind == "masked" else UniformDiscretePath(CondOT(), V)
    width = V + 1 if kind == "masked" else V
    x0 = path.sample_source((50, 30), generator=gen)
    for _ in range(20):
        logits = 3 * torch.randn(50, 30, width, generator=gen)
        allowed = torch.rand(50, 30, width, generator=gen) < 0.4
        allowed[:, 0] = False  # position 0 may go nowhere: it keeps its token
        x = ctmc_step(path, x0, logits, 1.0, allowed=allowed, generator=gen)
        moved = x != x0
        assert bool(moved.any()) and not bool(moved[:, 0].any())
        assert bool(allowed.gather(-1, x[..., None])[moved].all()), "a disallowed token was sampled"
        if kind == "masked":
            reachable = allowed[..., :V].any(-1)
            assert bool((x[reachable] != MASK).all()) and bool((x[~reachable] == MASK).all())


def test_ctmc_step_takes_per_sample_jump_probabilities_and_checks_its_inputs():
    path = MaskedDiscretePath(CondOT(), mask_id=MASK)
    x = path.sample_source((3, 200))
    logits = torch.zeros(3, 200, V + 1)
    out = ctmc_step(path, x, logits, torch.tensor([0.0, 1.0, 0.5]), generator=torch.Generator().manual_seed(6))
    assert bool((out[0] == MASK).all()) and not bool((out[1] == MASK).any())
    assert_binomial((out[2] != MASK).sum(), 200, 0.5, "jumps at probability 0.5")
    cases = [
        ("path", lambda: ctmc_step("masked", x, logits, 0.5)),
        ("x", lambda: ctmc_step(path, x.float(), logits, 0.5)),
        ("posterior", lambda: ctmc_step(path, x, logits[:, :5], 0.5)),
        ("jump_prob", lambda: ctmc_step(path, x, logits, torch.ones(2))),
        ("temperature", lambda: ctmc_step(path, x, logits, 0.5, temperature=0)),
        ("allowed", lambda: ctmc_step(path, x, logits, 0.5, allowed=torch.ones(3, 200, V + 1))),
        ("allowed", lambda: ctmc_step(path, x, logits, 0.5, allowed=torch.ones(3, 200, V, dtype=torch.bool))),
    ]
    for match, call in cases:
        with pytest.raises(ValueError, match=match):
            call()


def test_ctmc_and_loss_follow_the_device(device):
    path = MaskedDiscretePath(CondOT(), mask_id=MASK)
    x_init = path.sample_source((8, 12), device=device)
    out = solve_ctmc(masked_posterior, path, x_init, grids.uniform(4), generator=torch.Generator(device).manual_seed(0))
    assert out.device.type == device.type and out.dtype == torch.long and not bool((out == MASK).any())
    t = torch.full((8,), 0.5, device=device)
    s = path.sample(x_init, out, t, generator=torch.Generator(device).manual_seed(1))
    loss = masked_diffusion_loss(masked_posterior(s.x_t, t), s, path)
    assert loss.device.type == device.type and bool(torch.isfinite(loss))


# ---------------------------------------------------------------------------------------------------------- loss


def test_masked_loss_ignores_unmasked_tokens():
    path = MaskedDiscretePath(CondOT(), mask_id=MASK)
    x_1 = data_tokens((3, 8), seed=13)
    s = path.sample(path.sample_source(x_1.shape), x_1, torch.tensor([0.3, 0.6, 0.9]), generator=torch.Generator())
    logits = torch.randn(3, 8, V + 1, dtype=torch.float64, requires_grad=True)
    loss = masked_diffusion_loss(logits, s, path, reduction="none")
    unmasked = s.x_t != MASK
    assert bool(unmasked.any()) and bool((~unmasked).any())
    assert bool((loss[unmasked] == 0).all()) and bool((loss[~unmasked] > 0).all())
    loss.sum().backward()
    assert bool((logits.grad[unmasked] == 0).all())
    # SUBS: the mask token's own logit never matters
    bumped = logits.detach().clone()
    bumped[..., MASK] += 100.0
    torch.testing.assert_close(masked_diffusion_loss(bumped, s, path), masked_diffusion_loss(logits.detach(), s, path))
    # a model without a mask logit (mask_id == V) gives the same loss
    torch.testing.assert_close(
        masked_diffusion_loss(logits.detach()[..., :V], s, path), masked_diffusion_loss(logits.detach(), s, path)
    )


def test_masked_loss_integrates_to_the_nll_for_the_true_posterior():
    """For independent tokens and the exact posterior, E_t E_{x_t} [loss] = -log p(x_1) per token: quadrature over t
    of the two masking outcomes (masked w.p. 1 - kappa_t), Gauss-Legendre with 24 nodes."""
    kappa = Cosine()
    path = MaskedDiscretePath(kappa, mask_id=MASK)
    x_1 = torch.arange(V).repeat(2)[None]  # every token value once per row position
    nodes, weights = (torch.as_tensor(a, dtype=torch.float64) for a in np.polynomial.legendre.leggauss(24))
    t, w = (nodes + 1) / 2, weights / 2
    total = torch.zeros(x_1.shape, dtype=torch.float64)
    for tj, wj in zip(t, w, strict=True):
        k = kappa(tj).alpha
        for x_t, prob in ((torch.full_like(x_1, MASK), 1 - k), (x_1, k)):
            s = DiscretePathSample(x_0=torch.full_like(x_1, MASK), x_1=x_1, t=tj[None], x_t=x_t)
            total += wj * prob * masked_diffusion_loss(masked_posterior(x_t, tj[None]), s, path, reduction="none")
    torch.testing.assert_close(total[0], -torch.log(P_DATA[x_1[0]]), rtol=1e-10, atol=1e-10)


def test_masked_loss_monte_carlo_nelbo():
    """The same identity by sampling t ~ U(0, 1) and x_t from the path (finite variance for the cosine kappa)."""
    kappa = Cosine()
    path = MaskedDiscretePath(kappa, mask_id=MASK)
    gen = torch.Generator().manual_seed(14)
    x_1 = data_tokens((40_000, 1), seed=15)
    t = torch.rand(x_1.shape[0], generator=gen, dtype=torch.float64)
    s = path.sample(path.sample_source(x_1.shape), x_1, t, generator=gen)
    per_sample = masked_diffusion_loss(masked_posterior(s.x_t, t), s, path, reduction="none")[:, 0]
    truth = -torch.log(P_DATA[x_1[:, 0]])
    diff = per_sample - truth
    assert abs(float(diff.mean())) < 5 * float(diff.std()) / math.sqrt(diff.numel())
    torch.testing.assert_close(masked_diffusion_loss(masked_posterior(s.x_t, t), s, path), per_sample.mean())


def _uniform_nelbo_by_quadrature(kappa, logits_for, nodes):
    """E_t E_{x_t ~ p_t(. | x_1)} [uniform_diffusion_loss] per data token x_1 = 0..V-1: Gauss-Legendre over t with
    `nodes` nodes, exact over the V values of x_t."""
    path = UniformDiscretePath(kappa, vocab_size=V)
    xs, ws = (torch.as_tensor(a, dtype=torch.float64) for a in np.polynomial.legendre.leggauss(nodes))
    t = ((xs + 1) / 2).repeat_interleave(V)
    z = torch.arange(V).repeat(nodes)[:, None]
    k = kappa(t).alpha
    out = []
    for a in range(V):
        x_1 = torch.full_like(z, a)
        s = DiscretePathSample(x_0=z, x_1=x_1, t=t, x_t=z)
        loss = uniform_diffusion_loss(logits_for(z, t), s, path, reduction="none")[:, 0]
        prob = k * (z[:, 0] == a) + (1 - k) / V
        out.append(float((loss * prob * (ws / 2).repeat_interleave(V)).sum()))
    return torch.tensor(out, dtype=torch.float64)


def test_uniform_loss_integrates_to_the_nll_for_the_true_posterior():
    """The uniform chain's reverse with the exact posterior is the exact model: the NELBO of every token equals
    -log p(x_1). The integrand's ends converge slowly; with 800 Gauss-Legendre nodes the gap is 8e-7 (measured:
    2e-4, 1.3e-5, 7.9e-7 at 50, 200, 800 nodes, so the check also asserts the gap shrinks)."""
    post = uniform_posterior_for(CondOT())
    gaps = [_uniform_nelbo_by_quadrature(CondOT(), post, n) + torch.log(P_DATA) for n in (200, 800)]
    assert float(gaps[1].abs().max()) < 2e-6 and float(gaps[1].abs().max()) < float(gaps[0].abs().max()) / 8
    # a wrong model (the data law, ignoring x_t) pays more than the NLL for every token
    marginal = _uniform_nelbo_by_quadrature(CondOT(), lambda z, t: torch.log(P_DATA).expand(*z.shape, V), 200)
    assert bool((marginal + torch.log(P_DATA) > 1e-3).all())


def test_uniform_loss_monte_carlo_nelbo_and_properties():
    """By sampling: the mean loss of the exact posterior equals E[-log p(x_1)] within 5 standard errors; every
    per-token loss is >= 0."""
    kappa = Cosine()
    path = UniformDiscretePath(kappa, vocab_size=V)
    gen = torch.Generator().manual_seed(17)
    x_1 = data_tokens((40_000, 1), seed=18)
    t = torch.rand(x_1.shape[0], generator=gen, dtype=torch.float64)
    s = path.sample(path.sample_source(x_1.shape, generator=gen), x_1, t, generator=gen)
    per_sample = uniform_diffusion_loss(uniform_posterior_for(kappa)(s.x_t, t), s, path, reduction="none")[:, 0]
    assert bool((per_sample >= -1e-12).all())
    diff = per_sample - (-torch.log(P_DATA[x_1[:, 0]]))
    assert abs(float(diff.mean())) < 5 * float(diff.std()) / math.sqrt(diff.numel())
    torch.testing.assert_close(
        uniform_diffusion_loss(uniform_posterior_for(kappa)(s.x_t, t), s, path), per_sample.mean()
    )


# ---------------------------------------------------------------------------------------------------- bad inputs


def test_bad_inputs_raise_naming_the_argument():
    masked = MaskedDiscretePath(CondOT(), mask_id=MASK)
    uniform = UniformDiscretePath(CondOT(), vocab_size=V)
    x_1 = data_tokens((2, 5), seed=16)
    x_0, t = masked.sample_source(x_1.shape), torch.tensor([0.2, 0.4])
    s = masked.sample(x_0, x_1, t)
    logits = torch.zeros(2, 5, V + 1)
    cases = [
        ("kappa", lambda: MaskedDiscretePath("linear", mask_id=MASK)),
        ("mask_id", lambda: MaskedDiscretePath(CondOT(), mask_id=-1)),
        ("vocab_size", lambda: UniformDiscretePath(CondOT(), vocab_size=1)),
        ("x_0", lambda: masked.sample(x_1, x_1, t)),
        ("x_1", lambda: masked.sample(x_0, x_0, t)),
        ("x_1", lambda: masked.sample(x_0, x_1.float(), t)),
        ("x_1", lambda: uniform.sample(x_1, x_1 + V, t)),
        ("t", lambda: masked.sample(x_0, x_1, torch.tensor(0.5))),
        ("t", lambda: masked.sample(x_0, x_1, torch.tensor([0.5, 1.5]))),
        ("x_0, x_1", lambda: masked.sample(x_0[:1], x_1, t)),
        ("t", lambda: masked.sample(x_0, x_1, t[:1])),
        ("path", lambda: solve_ctmc(masked_posterior, "masked", x_0, grids.uniform(2))),
        ("posterior", lambda: solve_ctmc(None, masked, x_0, grids.uniform(2))),
        ("x_init", lambda: solve_ctmc(masked_posterior, masked, x_0.float(), grids.uniform(2))),
        ("x_init", lambda: solve_ctmc(masked_posterior, uniform, x_0, grids.uniform(2))),
        ("grid", lambda: solve_ctmc(masked_posterior, masked, x_0, grids.uniform(2).flip(0))),
        ("temperature", lambda: solve_ctmc(masked_posterior, masked, x_0, grids.uniform(2), temperature=0)),
        ("top_p", lambda: solve_ctmc(masked_posterior, masked, x_0, grids.uniform(2), top_p=1.5)),
        ("posterior", lambda: solve_ctmc(lambda x, t: torch.zeros(2, 5), masked, x_0, grids.uniform(2))),
        ("posterior", lambda: solve_ctmc(lambda x, t: torch.zeros(2, 5, V + 1), uniform, x_1, grids.uniform(2))),
        ("reduction", lambda: masked_diffusion_loss(logits, s, masked, reduction="max")),
        ("logits", lambda: masked_diffusion_loss(logits[:1], s, masked)),
        ("logits", lambda: masked_diffusion_loss(logits[..., :2], s, masked)),
        ("sample", lambda: masked_diffusion_loss(logits, (x_0, x_1), masked)),
        ("path", lambda: masked_diffusion_loss(logits, s, uniform)),
        ("path", lambda: uniform_diffusion_loss(logits[..., :V], s, masked)),
        ("logits", lambda: uniform_diffusion_loss(logits, s, uniform)),
        ("reduction", lambda: uniform_diffusion_loss(logits[..., :V], s, uniform, reduction="max")),
        ("sample", lambda: uniform_diffusion_loss(logits[..., :V], (x_0, x_1), uniform)),
    ]
    for name, call in cases:
        with pytest.raises(ValueError, match=name):
            call()
