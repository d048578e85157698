"""The zeta-discrete family (the paper's Sec. 4): each letter is a population of `zeta` copies that mutate
independently (parent-independent mutation towards a uniform pi, no resampling), so a position's state is the
count vector z: (K,) summing to zeta, distributed Multinomial(zeta, rho_t(x_0)), rho_t(b) = kappa_t e_b +
(1 - kappa_t) pi.

The ELBO is the continuous-time one of a Markov chain on counts. Run from data towards noise, each copy resets to a
uniform letter at rate beta_t = kappa'_t / kappa_t, so a copy of letter a turns into c at rate beta_t / K. The reverse
rate from z to z + e_a - e_c given x_0 = b is (beta_t / K) z_c rho_a(b) / rho_c(b) (the (z_a + 1) of the forward rate
cancels against the multinomial ratio), and the model's replaces rho_a(b) / rho_c(b) by its posterior mean
r_hat_ac = sum_b' w_b' rho_a(b') / rho_c(b'). The diffusion term per position is

    (beta_t / K) sum_c z_c sum_{a != c} D(r_ac || r_hat_ac),   D(r || q) = r log(r / q) - r + q,

the generalised KL between the two reverse rates. With zeta = 1 this is, term by term, the uniform-path NELBO of
`flowlab.core.losses.uniform_diffusion_loss`.

`ZetaDiscreteDomain` puts the family on the Gaussian domain's clock: with the VP log-SNR lambda_t of
`GaussianDomain`, kappa_t^2 = sigmoid(lambda_t - log(K zeta)), i.e. K zeta kappa^2 / (1 - kappa^2) = e^lambda. For
large zeta, sqrt(K zeta)(z / zeta - pi) is then N(sqrt(K zeta) kappa (e_b - pi), I - 1 1^T / K) with
K zeta kappa^2 = e^lambda to leading order: the Gaussian domain's x_t / sigma_t, in the first eigenspace of the
mutation matrix (the paper's Thm 4.1, there with the embedding scaled by sqrt(K)). Its sufficient statistic
phi_b ∝ p(z | b) ∝ h^(z_b), h = 1 + K kappa / (1 - kappa), tends to the Gaussian one, so one sufficient-statistic
network has an ELBO in every member of the family, and that ELBO tends to the Gaussian domain's as zeta grows. The
limit needs K zeta >> e^lambda over the whole clock: at the top, e^lambda_hi is about 9e3 (t_hi = 0.999), so kappa^2
there is 0.70 at zeta = 1000 and 0.19 at zeta = 10^4 for K = 4.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from flowlab.biology_dynamics.wright_fisher.objective import elbo_summary
from flowlab.core.distributions import multinomial_counts, rand
from flowlab.core.schedules import VP

__all__ = ["ZetaDiscreteDomain", "zeta_diffusion_term"]

F64 = torch.float64


def zeta_diffusion_term(
    probs: torch.Tensor, x_0: torch.Tensor, counts: torch.Tensor, kappa: torch.Tensor, d_kappa: torch.Tensor
) -> torch.Tensor:
    """The integrand in core time of the zeta-discrete NELBO (module docstring), per position.

    probs: (B, L, K) the model's posterior w over x_0; x_0: (B, L) int64; counts: (B, L, K) the state z (any zeta);
    kappa, d_kappa: (B,) kappa_t and its time derivative, 0 < kappa < 1 (the rates blow up at 0, the ratios at 1).
    -> (B, L) float64.
    O(B L K^2) memory: meant for small alphabets (DNA, the toys).
    """
    letters = probs.shape[-1]
    if counts.shape != probs.shape or x_0.shape != probs.shape[:-1]:
        raise ValueError(
            f"probs, counts, x_0: expected (B, L, K), (B, L, K), (B, L), got {tuple(probs.shape)}, "
            f"{tuple(counts.shape)}, {tuple(x_0.shape)}"
        )
    p, z = probs.to(F64), counts.to(F64)
    k = kappa.to(F64).reshape(-1, 1, 1, 1)
    h = 1 + letters * k / (1 - k).clamp_min(torch.finfo(F64).tiny)  # rho_b(b) / rho_c(b), c != b
    p_a, p_c = p.unsqueeze(-1), p.unsqueeze(-2)  # (B, L, K, 1) over a, (B, L, 1, K) over c
    model = (1 - p_a - p_c).clamp_min(0) + p_a * h + p_c / h
    one_hot = torch.nn.functional.one_hot(x_0, letters).to(F64)
    is_a, is_c = one_hot.unsqueeze(-1), one_hot.unsqueeze(-2)
    true = 1 + is_a * (h - 1) + is_c * (1 / h - 1)
    bregman = true * (true.log() - model.clamp_min(torch.finfo(F64).tiny).log()) - true + model
    off = 1 - torch.eye(letters, dtype=F64, device=p.device)
    per_c = (bregman * off).sum(-2)  # (B, L, K): summed over a != c
    beta = (d_kappa.to(F64) / kappa.to(F64)).reshape(-1, 1)
    return beta / letters * (z * per_c).sum(-1)


class ZetaDiscreteDomain:
    """The zeta-discrete member of the family over `letters` letters on the Gaussian domain's VP clock (core times
    [0, t_hi]), for sufficient-statistic networks `model(x=phi[, cond=...]) -> logits`, posterior softmax(logits +
    log phi). It computes ELBOs (`elbo`) for comparing members of the family; sampling stays with the three domains."""

    def __init__(self, letters: int, zeta: int, *, t_hi: float = 0.999) -> None:
        if isinstance(letters, bool) or not isinstance(letters, int) or letters < 2:
            raise ValueError(f"letters: expected an alphabet size >= 2, got {letters!r}")
        if isinstance(zeta, bool) or not isinstance(zeta, int) or zeta < 1:
            raise ValueError(f"zeta: expected a population size >= 1, got {zeta!r}")
        if not 0 < t_hi < 1:
            raise ValueError(f"t_hi: expected a core time in (0, 1), got {t_hi!r}")
        self.letters, self.zeta, self.t_hi = letters, zeta, float(t_hi)
        self.schedule = VP()
        self.lam_lo, self.lam_hi = (float(self._lam(torch.tensor(t, dtype=F64))) for t in (0.0, t_hi))

    def __repr__(self) -> str:
        return f"ZetaDiscreteDomain(letters={self.letters}, zeta={self.zeta})"

    def _clock(self, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The VP log-SNR lambda_t and d lambda / dt, float64, shaped like t."""
        s = self.schedule(t.to(F64))
        return 2 * torch.log(s.alpha / s.sigma), 2 * (s.d_alpha / s.alpha - s.d_sigma / s.sigma)

    def _lam(self, t: torch.Tensor) -> torch.Tensor:
        return self._clock(t)[0]

    def kappa_at(self, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """kappa_t = sqrt(sigmoid(lambda_t - log(K zeta))) and d kappa / dt, each (B,) float64, for t: (B,)."""
        lam, d_lam = self._clock(t)
        kappa = torch.sigmoid(lam - math.log(self.letters * self.zeta)).sqrt()
        return kappa, 0.5 * kappa * (1 - kappa**2) * d_lam

    def rho(self, x_0: torch.Tensor, kappa: torch.Tensor) -> torch.Tensor:
        """Each copy's letter law rho_t(x_0) = kappa e_{x_0} + (1 - kappa) pi: x_0 (B, L), kappa (B,) -> (B, L, K)."""
        k = kappa.to(F64).reshape(-1, 1, 1)
        return k * torch.nn.functional.one_hot(x_0, self.letters).to(F64) + (1 - k) / self.letters

    def log_likelihood(self, counts: torch.Tensor, kappa: torch.Tensor) -> torch.Tensor:
        """log p(z | x_0 = b) up to a constant in b, z_b log h: counts (B, L, K), kappa (B,) -> (B, L, K) float64."""
        k = kappa.to(F64).reshape(-1, 1, 1)
        return counts.to(F64) * torch.log1p(self.letters * k / (1 - k).clamp_min(torch.finfo(F64).tiny))

    def posterior_logits(self, model: Any, counts: torch.Tensor, kappa: torch.Tensor, cond=None) -> torch.Tensor:
        """Logits of the model's posterior w over x_0 given the counts: (B, L, K) float64 (the `GaussianDomain` ssp
        contract: the network reads phi = softmax(log p(z | b)) and its logits are added to log p(z | b))."""
        like = self.log_likelihood(counts, kappa)
        return model(x=torch.softmax(like, dim=-1).float(), **(cond or {})).to(F64) + like

    def _diffusion(self, model: Any, x_0: torch.Tensor, generator: torch.Generator, cond=None) -> torch.Tensor:
        """One draw of the diffusion term per position, (B, L): the integrand at lambda uniform on
        [lambda_lo, lambda_hi], times the width and dt / dlambda."""
        u = rand((x_0.shape[0],), generator=generator, device=x_0.device, dtype=F64)
        lam = self.lam_lo + u * (self.lam_hi - self.lam_lo)
        t = self.schedule.snr_inverse(torch.exp(lam / 2)).clamp(0, self.t_hi)
        kappa, d_kappa = self.kappa_at(t)
        counts = multinomial_counts(self.rho(x_0, kappa), self.zeta, generator=generator)
        w = torch.softmax(self.posterior_logits(model, counts, kappa, cond), dim=-1)
        term = zeta_diffusion_term(w, x_0, counts, kappa, d_kappa)
        return (self.lam_hi - self.lam_lo) * term / self._clock(t)[1][:, None]

    def prior_kl(self) -> float:
        """KL(Multinomial(zeta, rho_0(b)) || Multinomial(zeta, pi)) = zeta KL(rho_0(b) || pi), the same for every b."""
        kappa, _ = self.kappa_at(torch.zeros(1, dtype=F64))
        rho = self.rho(torch.zeros(1, 1, dtype=torch.long), kappa)[0, 0]
        return self.zeta * float((rho * torch.log(rho * self.letters)).sum())

    @torch.no_grad()
    def elbo(self, model: Any, x_0: torch.Tensor, *, generator: torch.Generator, draws: int = 8, cond=None):
        """Negative ELBO in nats per position of x_0: (B, L) int64: diffusion (with its s.e.) + prior +
        reconstruction -log w_{x_0} at t_hi, the keys of `GaussianDomain.elbo`."""
        if not isinstance(x_0, torch.Tensor) or x_0.dtype != torch.long or x_0.dim() != 2:
            raise ValueError("x_0: expected (B, L) int64 letters")
        if bool((x_0 < 0).any()) or bool((x_0 >= self.letters).any()):
            raise ValueError(f"x_0: expected letters in [0, {self.letters})")
        if isinstance(draws, bool) or not isinstance(draws, int) or draws < 1:
            raise ValueError(f"draws: expected a positive number of time draws, got {draws!r}")
        terms = torch.cat([self._diffusion(model, x_0, generator, cond).mean(-1) for _ in range(draws)])
        kappa, _ = self.kappa_at(torch.full((x_0.shape[0],), self.t_hi, dtype=F64, device=x_0.device))
        counts = multinomial_counts(self.rho(x_0, kappa), self.zeta, generator=generator)
        log_w = torch.log_softmax(self.posterior_logits(model, counts, kappa, cond), dim=-1)
        return elbo_summary(terms, self.prior_kl(), log_w, x_0)
