"""The number of ancestral lineages A(tau) of Kingman's coalescent with parent-independent mutation at rate psi,
started from infinitely many lineages (Griffiths 1980; Tavare 1984): the first draw of the Wright-Fisher exact
forward sampler (Jenkins & Spano 2017), which then draws x_tau ~ Dirichlet(psi pi + A e_{x_0}).

- `lineage_probs`: q_m(tau) = sum_{k >= m} (-1)^(k-m) (2k + psi - 1) (psi + m)_(k-1) / (m! (k-m)!)
  exp(-k (k + psi - 1) tau / 2), (a)_(j) the rising factorial, truncated at k_max, in float64 with log-gamma
  coefficients; where the alternating sum's rounding could exceed 1e-12 (K eps sum_k |term_k| > 1e-12, which happens
  as tau falls below about 0.2) that q_m is summed again in mpmath at 60 digits.
- `griffiths_moments`: Griffiths' normal approximation at small tau, beta = (psi - 1) tau / 2,
  eta = beta / (e^beta - 1), mean 2 eta / tau, variance (2 eta / tau) (eta + beta)^2 (1 + eta / (eta + beta)
  - 2 eta) / beta^2 (2 / (3 tau) as beta -> 0).
- `sample_lineages`: inverse-CDF draws from the series for tau >= small_tau (0.1); below it, Griffiths' rounded
  normal draw at GRIFFITHS_TAU (0.01) continued by the exact death process for the remaining tau - 0.01 (the spec's
  "alternative exact path"), and Griffiths' draw itself up to 0.01. Griffiths' mean sits about 0.17 lineages above
  the series' at every tau tried (0.03-0.2): a total variation of 0.022 at tau = 0.05 if used there directly, about
  a fiftieth of its standard deviation (8 lineages) at 0.01 if it holds there too (the series is too costly to sum
  at 0.01), and the death process only contracts what is left: the branch's law is within TV 8e-4 of the series at
  tau = 0.05 and 0.1 for psi = 4, 20 and 100.
- `simulate_lineages`: the pure-death process with rate k (k + psi - 1) / 2 from a start (Gillespie), and
  `death_process_probs`: its law after given durations from a start law (uniformisation), the table's version.
"""

from __future__ import annotations

import math

import torch

from flowlab.core.distributions import rand, randn

__all__ = [
    "death_process_probs",
    "griffiths_moments",
    "lineage_probs",
    "sample_lineages",
    "simulate_lineages",
]

#: below this tau the series' alternating sum loses its digits and the small-time branch takes over
SMALL_TAU = 0.1
#: the small-time branch draws Griffiths' approximation at this tau and runs the exact death process from there
GRIFFITHS_TAU = 0.01
#: the absolute error allowed in a probability before its series is summed again in mpmath
_TOLERANCE = 1e-12


def _check_psi(psi: float) -> float:
    if not (isinstance(psi, int | float) and math.isfinite(psi) and psi > 1):
        raise ValueError(f"psi: expected a mutation rate > 1 (psi = B for B letters), got {psi!r}")
    return float(psi)


def _check_tau(tau: object, minimum: float = 0.0) -> torch.Tensor:
    if not isinstance(tau, torch.Tensor) or tau.dim() != 1 or not tau.is_floating_point():
        raise ValueError(f"tau: expected a 1-D float tensor of times, got {tau!r:.60}")
    if not bool(torch.isfinite(tau).all()) or bool((tau <= minimum).any()):
        raise ValueError(f"tau: expected finite times > {minimum:g}")
    return tau.to(torch.float64)


def _check_generator(generator: object) -> None:
    if not isinstance(generator, torch.Generator):
        raise ValueError(f"generator: expected a torch.Generator, got {type(generator).__name__}")


def _exponential(shape: torch.Size, generator: torch.Generator, device: torch.device) -> torch.Tensor:
    """Exp(1) draws of `shape`, float64: drawn on the generator's device, then moved to `device`."""
    draw = torch.empty(shape, dtype=torch.float64, device=generator.device).exponential_(generator=generator)
    return draw.to(device)


def _log_terms(tau: torch.Tensor, psi: float, k_max: int) -> tuple[torch.Tensor, torch.Tensor]:
    """log |term_{k,m}(tau)| and its sign: (T, M, K) with m = 0..k_max, k = 0..k_max (-inf where k < m)."""
    k = torch.arange(k_max + 1, dtype=torch.float64)
    m = k[:, None]
    lg = torch.lgamma
    coef = torch.log(2 * k + psi - 1) + lg(psi + m + k - 1) - lg(psi + m) - lg(m + 1) - lg((k - m).clamp_min(0) + 1)
    coef = torch.where(k >= m, coef, torch.full_like(coef, -math.inf))
    log_terms = coef[None] - (k * (k + psi - 1) / 2)[None, None] * tau[:, None, None]
    sign = torch.where(((k - m) % 2 == 0), 1.0, -1.0).expand_as(log_terms)
    return log_terms, sign


def _mpmath_term(tau: float, psi: float, m: int, k_max: int) -> float:
    import mpmath

    with mpmath.workdps(60):
        total = mpmath.mpf(0)
        for k in range(m, k_max + 1):
            coef = (2 * k + psi - 1) * mpmath.rf(psi + m, k - 1) / (mpmath.factorial(m) * mpmath.factorial(k - m))
            total += (-1) ** (k - m) * coef * mpmath.exp(-k * (k + psi - 1) * mpmath.mpf(tau) / 2)
        return float(total)


def lineage_probs(tau: torch.Tensor, psi: float, *, k_max: int = 80, high_precision: bool = True) -> torch.Tensor:
    """q_m(tau) for m = 0..k_max: tau (T,) > 0 -> (T, k_max + 1) float64, each row summing to 1 (up to the mass
    beyond k_max, negligible for tau >= 0.1). Exact to float64 rounding where the float64 sum keeps its digits, to
    mpmath's 60 digits elsewhere (the cancelling cells: slow, about 0.1 s per tau near 0.1 and more below).
    high_precision=False: the plain float64 sum everywhere, not clipped, the series as a float64 code computes it
    (wrong below tau ~ 0.1: negative cells, mass far from 1; the exactness scenario shows it)."""
    psi = _check_psi(psi)
    tau = _check_tau(tau)
    if not (isinstance(k_max, int) and k_max >= 1):
        raise ValueError(f"k_max: expected an int >= 1, got {k_max!r}")
    log_terms, sign = _log_terms(tau, psi, k_max)
    last = log_terms[..., -1].amax(-1)  # the largest term at k = k_max, over m
    if bool((last > math.log(_TOLERANCE)).any()):
        bad = float(tau[last > math.log(_TOLERANCE)].min())
        raise ValueError(
            f"tau: the series truncated at k_max={k_max} has not converged at tau={bad:g}; raise k_max or use "
            f"the small-time approximation (`sample_lineages` does below tau={SMALL_TAU})"
        )
    scale = log_terms.amax(-1, keepdim=True).clamp_min(-700)
    parts = sign * (log_terms - scale).exp()
    total = parts.sum(-1) * scale[..., 0].exp()
    magnitude = parts.abs().sum(-1) * scale[..., 0].exp()
    if not high_precision:
        return total
    rounding = magnitude * (k_max + 1) * torch.finfo(torch.float64).eps
    for i, m in (rounding > _TOLERANCE).nonzero().tolist():
        total[i, m] = _mpmath_term(float(tau[i]), psi, m, k_max)
    return total.clamp_min(0)


def griffiths_moments(tau: torch.Tensor, psi: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and variance of Griffiths' normal approximation to A(tau): tau (T,) > 0 -> two (T,) float64."""
    psi = _check_psi(psi)
    tau = _check_tau(tau)
    beta = 0.5 * (psi - 1) * tau
    eta = torch.where(beta > 1e-8, beta / torch.expm1(beta).clamp_min(1e-300), 1 - beta / 2)
    mean = 2 * eta / tau
    var = mean * (eta + beta) ** 2 * (1 + eta / (eta + beta) - 2 * eta) / beta.clamp_min(1e-300) ** 2
    var = torch.where(beta > 1e-4, var, 2 / (3 * tau))
    return mean, var


def sample_lineages(
    tau: torch.Tensor, psi: float, *, generator: torch.Generator, k_max: int = 80, small_tau: float = SMALL_TAU
) -> torch.Tensor:
    """One draw of A(tau) per entry: tau (B,) > 0 -> (B,) int64 on tau's device. tau >= small_tau: inverse CDF of
    `lineage_probs` (one series per distinct tau); GRIFFITHS_TAU < tau < small_tau: Griffiths' normal draw at
    GRIFFITHS_TAU, rounded and clipped at 0, then the death process (`simulate_lineages`, about 2 / GRIFFITHS_TAU -
    2 / tau loop steps expected at psi = 4); tau <= GRIFFITHS_TAU: Griffiths' draw at tau. Computed on the CPU
    (where the series is summed), the noise drawn on the generator's device."""
    tau = _check_tau(tau)
    device, tau = tau.device, tau.cpu()
    _check_generator(generator)
    u = rand(tau.shape, generator=generator, device=tau.device, dtype=torch.float64)
    z = randn(tau.shape, generator=generator, device=tau.device, dtype=torch.float64)
    out = torch.zeros(tau.shape, dtype=torch.long)
    small = tau < small_tau
    if bool(small.any()):
        start = tau[small].clamp_max(GRIFFITHS_TAU)
        mean, var = griffiths_moments(start, psi)
        out[small] = (mean + var.sqrt() * z[small]).round().clamp_min(0).long()
        later = small & (tau > GRIFFITHS_TAU)
        if bool(later.any()):
            out[later] = simulate_lineages(out[later], tau[later] - GRIFFITHS_TAU, psi, generator=generator)
    if bool((~small).any()):
        values, index = torch.unique(tau[~small], return_inverse=True)
        cdf = lineage_probs(values, psi, k_max=k_max).cumsum(-1)
        cdf = cdf / cdf[:, -1:]
        rows = cdf[index]
        out[~small] = torch.searchsorted(rows, u[~small][:, None]).squeeze(-1).clamp_max(k_max)
    return out.to(device)


def simulate_lineages(
    start: torch.Tensor, duration: torch.Tensor | float, psi: float, *, generator: torch.Generator
) -> torch.Tensor:
    """The pure-death process k -> k - 1 at rate k (k + psi - 1) / 2 (coalescence k (k - 1) / 2 plus mutation
    k psi / 2), run for `duration` from `start` lineages: start (B,) int64 >= 0 -> (B,) int64 (Gillespie, batched
    over samples, one loop step per death), on start's device, the waiting times drawn on the generator's."""
    psi = _check_psi(psi)
    if not isinstance(start, torch.Tensor) or start.dtype != torch.long or start.dim() != 1 or bool((start < 0).any()):
        raise ValueError("start: expected a 1-D int64 tensor of lineage counts >= 0")
    _check_generator(generator)
    left = torch.as_tensor(duration, dtype=torch.float64, device=start.device).expand(start.shape).clone()
    if not bool(torch.isfinite(left).all()) or bool((left < 0).any()):
        raise ValueError("duration: expected finite times >= 0")
    k = start.clone()
    alive = k > 0
    while bool(alive.any()):
        rate = k[alive].double() * (k[alive].double() + psi - 1) / 2
        wait = _exponential(rate.shape, generator, rate.device) / rate
        dies = wait <= left[alive]
        idx = alive.nonzero().squeeze(-1)
        left[idx[dies]] -= wait[dies]
        k[idx[dies]] -= 1
        alive[idx[~dies]] = False
        alive &= k > 0
    return k


def death_process_probs(start: torch.Tensor, duration: torch.Tensor, psi: float) -> torch.Tensor:
    """The law of the pure-death process of `simulate_lineages` after each duration, from the law `start` over
    0..M lineages: start (M + 1,) >= 0, duration (R,) >= 0 -> (R, M + 1) float64. By uniformisation at the top rate
    Lambda = M (M + psi - 1) / 2: p(d) = sum_j Poisson(j; Lambda d) start U^j with U = I + Q / Lambda, every term
    non-negative (no cancellation), the Poisson tail cut 10 standard deviations out; about Lambda max(d) vector
    steps (4000 for M = 300, d = 0.09), each added to the result as it is made."""
    psi = _check_psi(psi)
    if not isinstance(start, torch.Tensor) or start.dim() != 1 or start.numel() == 0:
        raise ValueError("start: expected a non-empty 1-D tensor of probabilities over lineage counts 0..M")
    if not bool(torch.isfinite(start).all()) or bool((start < 0).any()):
        raise ValueError("start: expected finite probabilities >= 0")
    if not isinstance(duration, torch.Tensor) or duration.dim() != 1:
        raise ValueError("duration: expected a 1-D tensor of times")
    duration = duration.to(start.device, torch.float64)
    if not bool(torch.isfinite(duration).all()) or bool((duration < 0).any()):
        raise ValueError("duration: expected finite times >= 0")
    v = start.to(torch.float64)
    if v.numel() == 1 or duration.numel() == 0:  # nobody to die, or no durations asked
        return v.expand(duration.numel(), -1).clone()
    k = torch.arange(v.numel(), dtype=torch.float64, device=v.device)
    rate = k * (k + psi - 1) / 2
    top = float(rate[-1])  # > 0: psi > 1 and M >= 1
    stay, move = 1 - rate / top, rate / top
    lam = top * duration[:, None]  # (R, 1) Poisson means; at d = 0 only the j = 0 term counts (xlogy(0, 0) = 0)
    out = torch.zeros(duration.numel(), v.numel(), dtype=torch.float64, device=v.device)
    mean = float(lam.max())
    for j in range(math.ceil(mean + 10 * math.sqrt(mean) + 10) + 1):
        if j:  # one step of U: each count stays, or loses one lineage to the count below
            v, last = v * stay, v
            v[:-1] += last[1:] * move[1:]
        out += torch.exp(torch.special.xlogy(j, lam) - lam - math.lgamma(j + 1)) * v
    return out
