"""The exactness scenario's checks on the wider family: the finite Wright-Fisher population against the exact
sampler, and the zeta-discrete ELBOs against the uniform-path and Gaussian ones.

- Population (spec 6.1): `simulate_population` at each zeta against `WrightFisherPath.sample` at each tau from the
  same vertex: per letter, the z-score of the difference of means and of variances (the variance's standard error
  from the fourth central moment); the largest |z| over letters is reported. Below tau = 0.1 the sampler draws its
  lineages from its small-time branch (Griffiths at 0.01, then the death process), so there the comparison is with
  that branch.
- zeta = 1: the zeta-discrete integrand against `core.losses.uniform_diffusion_loss` on the same draws (random
  posteriors), largest absolute difference.
- The ladder: a one-position target p (a seeded Dirichlet(0.5) draw) and two sufficient-statistic models with the
  prior p_model = (p + uniform) / 2. The exact one, posterior softmax(log phi + log p_model), is the true reverse
  process of data drawn from p_model in every domain, so its NELBO is the cross-entropy H(p, p_model) in all of them
  (largest |NELBO - H| / s.e. reported). The tempered one, softmax(0.7 log phi + log p_model), is not, so its NELBO
  depends on the domain: the zeta-discrete NELBO should approach the Gaussian domain's as zeta grows (Thm 4.1).
"""

from __future__ import annotations

import math

import torch

from flowlab.biology_dynamics.wright_fisher.discrete import DiscreteDomain
from flowlab.biology_dynamics.wright_fisher.gaussian import GaussianDomain
from flowlab.biology_dynamics.wright_fisher.population import simulate_population
from flowlab.biology_dynamics.wright_fisher.process import WrightFisherPath
from flowlab.biology_dynamics.wright_fisher.toy import categorical_target
from flowlab.biology_dynamics.wright_fisher.zeta import ZetaDiscreteDomain, zeta_diffusion_term
from flowlab.core.losses import uniform_diffusion_loss

__all__ = ["ladder_metrics", "population_metrics", "tempered_model", "zeta_one_identity"]

F64 = torch.float64
TEMPER = 0.7


def _z_scores(a: torch.Tensor, b: torch.Tensor) -> tuple[float, float]:
    """Largest |z| over letters of the mean and the variance differences of samples a, b: (n, K)."""

    def var_se2(x: torch.Tensor) -> torch.Tensor:
        c = x - x.mean(0)
        return ((c**4).mean(0) - x.var(0) ** 2).clamp_min(0) / x.shape[0]

    mean_z = (a.mean(0) - b.mean(0)) / (a.var(0) / a.shape[0] + b.var(0) / b.shape[0]).sqrt()
    var_z = (a.var(0) - b.var(0)) / (var_se2(a) + var_se2(b)).sqrt()
    return float(mean_z.abs().max()), float(var_z.abs().max())


def population_metrics(
    letters: int, zetas: tuple[int, ...], taus: tuple[float, ...], n: int, g: torch.Generator
) -> dict[str, float]:
    """`pop_mean_z_zeta{zeta}_tau{tau}` and `pop_var_z_...`: the population against the exact sampler."""
    path = WrightFisherPath(letters)
    out = {}
    for zeta in zetas:
        frequencies = simulate_population(0, taus, letters=letters, zeta=zeta, n=n, generator=g)
        for tau, simulated in zip(taus, frequencies, strict=True):
            clear = tau * (1 + 1e-9)  # clear of float round trips: tau = 0.1 stays on the series branch
            t = torch.full((n,), 1 - (-math.expm1(-path.psi * clear / 2)) / path.t_max, dtype=F64)
            exact = path.sample(torch.zeros(n, 1, dtype=torch.long), t, generator=g)[:, 0]
            mean_z, var_z = _z_scores(simulated, exact)
            out[f"pop_mean_z_zeta{zeta}_tau{tau:g}"] = mean_z
            out[f"pop_var_z_zeta{zeta}_tau{tau:g}"] = var_z
    return out


def zeta_one_identity(letters: int, n: int, g: torch.Generator) -> float:
    """Largest |zeta-discrete integrand at zeta = 1 - uniform-path NELBO integrand| over n draws of 4 positions."""
    domain = DiscreteDomain(letters)
    x_0 = torch.randint(letters, (n, 4), generator=g)
    t = torch.rand(n, generator=g, dtype=F64)
    sample = domain.path.sample(domain.path.sample_source((n, 4), generator=g), x_0, t, generator=g)
    logits = 3 * torch.randn(n, 4, letters, generator=g, dtype=F64)
    reference = uniform_diffusion_loss(logits, sample, domain.path, reduction="none")
    kappa, d_kappa = domain.path.kappa_at(t)
    counts = torch.nn.functional.one_hot(sample.x_t, letters).to(F64)
    mine = zeta_diffusion_term(torch.softmax(logits, -1), x_0, counts, kappa, d_kappa)
    return float((mine - reference).abs().max())


def tempered_model(prior: torch.Tensor, temper: float):
    """A sufficient-statistic model: mixture logits (temper - 1) log phi + log prior, so the posterior is
    softmax(temper log phi + log prior); phi arrives in float32, as a network reads it."""

    def model(*, x: torch.Tensor) -> torch.Tensor:
        log_phi = torch.log(x.to(F64).clamp_min(torch.finfo(F64).tiny))
        return (temper - 1) * log_phi + prior.log()

    return model


def ladder_metrics(
    letters: int, zetas: tuple[int, ...], positions: int, draws: int, seed: int, g: torch.Generator
) -> dict[str, float]:
    """The exact model's largest |NELBO - H(p, p_model)| / s.e. over the domains (`exact_model_max_z`), and the
    tempered model's NELBO with its s.e. in the Gaussian domain and at each zeta (`nelbo_gaussian`,
    `nelbo_zeta{zeta}`, `..._se`)."""
    target = categorical_target(letters, seed=seed)
    prior = (target + 1 / letters) / 2
    x_0 = torch.multinomial(target, positions, replacement=True, generator=g).reshape(-1, 1)
    cross_entropy = float(-(target * prior.log()).sum())
    domains = {"gaussian": GaussianDomain(letters, inputs="ssp")}
    domains.update({f"zeta{zeta}": ZetaDiscreteDomain(letters, zeta) for zeta in zetas})
    out, worst = {"cross_entropy": cross_entropy}, 0.0
    for name, domain in domains.items():
        exact = domain.elbo(tempered_model(prior, 1.0), x_0, generator=g, draws=draws)
        worst = max(worst, abs(exact["nats"] - cross_entropy) / exact["diffusion_se"])
        tempered = domain.elbo(tempered_model(prior, TEMPER), x_0, generator=g, draws=draws)
        out[f"nelbo_{name}"], out[f"nelbo_{name}_se"] = tempered["nats"], tempered["diffusion_se"]
    out["exact_model_max_z"] = worst
    return out
