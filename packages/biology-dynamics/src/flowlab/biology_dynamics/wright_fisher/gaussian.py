"""The Gaussian domain: variance-preserving diffusion of the centred one-hot embedding emb_b = e_b - 1/K (the first
eigenspace of the mutation matrix, orthogonal to the all-ones vector), x_t = alpha_t emb(x_0) + sigma_t eps, with
the core's `VP` schedule and ancestral sampler, decoded by the posterior at the end.

The continuous-time ELBO (Kingma et al. 2021) in log-SNR lambda = log(alpha^2 / sigma^2), sampled uniformly on
[lambda(t_lo), lambda(t_hi)]: (width / 2) e^lambda ||emb(x_0) - emb_hat||^2 per position, emb_hat = sum_b w_b emb_b,
plus the prior KL(N(alpha_0 emb, sigma_0^2) || N(0, I)) and the reconstruction -log w_{x_0} at t_hi. The posterior
w: `inputs="native"`, the network reads (x_t, t) and returns its logits; `inputs="ssp"`, it reads the sufficient
statistic phi_b ∝ N(x_t; alpha emb_b, sigma^2) (no time) and returns mixture logits added to log phi.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import torch

from flowlab.biology_dynamics.wright_fisher.objective import elbo_summary
from flowlab.core.distributions import multinomial, rand, randn
from flowlab.core.schedules import VP
from flowlab.core.solvers import sample_diffusion

__all__ = ["GaussianDomain"]


class GaussianDomain:
    """VP Gaussian diffusion of letter embeddings over `letters` letters; core times in [0, t_hi]."""

    def __init__(self, letters: int, *, inputs: Literal["native", "ssp"] = "native", t_hi: float = 0.999) -> None:
        if inputs not in ("native", "ssp"):
            raise ValueError(f"inputs: expected 'native' or 'ssp', got {inputs!r}")
        self.letters, self.inputs, self.t_hi = letters, inputs, t_hi
        self.schedule = VP()
        self.emb = torch.eye(letters, dtype=torch.float64) - 1 / letters
        self.lam_lo, self.lam_hi = (float(self._lam(torch.tensor(t, dtype=torch.float64))) for t in (0.0, t_hi))

    def __repr__(self) -> str:
        return f"GaussianDomain(letters={self.letters}, inputs={self.inputs!r})"

    def _lam(self, t: torch.Tensor) -> torch.Tensor:
        s = self.schedule(t)
        return 2 * torch.log(s.alpha / s.sigma)

    def _t_of_lam(self, lam: torch.Tensor) -> torch.Tensor:
        return self.schedule.snr_inverse(torch.exp(lam / 2))

    def _log_likelihood(self, x_t: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """log N(x_t; alpha emb_b, sigma^2 I) up to a constant in b: (B, L, K) float64 (|emb_b| is one length)."""
        s = self.schedule(t.to(torch.float64))
        scale = (s.alpha / s.sigma**2)[:, None, None]
        return scale * x_t.to(torch.float64) @ self.emb.to(x_t.device).T

    def posterior_logits(self, model: Any, x_t: torch.Tensor, t: torch.Tensor, cond=None) -> torch.Tensor:
        """x_t (B, L, K), t (B,) -> logits of p_theta(x_0 | x_t), (B, L, K) float64."""
        cond = cond or {}
        if self.inputs == "ssp":
            like = self._log_likelihood(x_t, t)
            return model(x=torch.softmax(like, dim=-1).float(), **cond).to(torch.float64) + like
        return model(x=x_t.float(), t=t.float(), **cond).to(torch.float64)

    def _noisy(self, x_0: torch.Tensor, t: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        s = self.schedule(t.to(torch.float64))
        eps = randn((*x_0.shape, self.letters), generator=generator, device=x_0.device, dtype=torch.float64)
        return s.alpha[:, None, None] * self.emb.to(x_0.device)[x_0] + s.sigma[:, None, None] * eps

    def _diffusion(self, model: Any, x_0: torch.Tensor, generator: torch.Generator, cond=None) -> torch.Tensor:
        u = rand((x_0.shape[0],), generator=generator, device=x_0.device, dtype=torch.float64)
        lam = self.lam_lo + u * (self.lam_hi - self.lam_lo)
        t = self._t_of_lam(lam).clamp(0, self.t_hi)
        x_t = self._noisy(x_0, t, generator)
        w = torch.softmax(self.posterior_logits(model, x_t, t, cond), dim=-1)
        emb = self.emb.to(x_0.device)
        err = ((emb[x_0] - w @ emb) ** 2).sum(-1)
        return (self.lam_hi - self.lam_lo) / 2 * lam.exp()[:, None] * err

    def loss_fn(self, model: Any, batch: Any, generator: torch.Generator) -> tuple[torch.Tensor, dict]:
        """For `core.train.fit`: the diffusion term in nats per position; logs `nan_rate`."""
        x_0, cond = batch if isinstance(batch, tuple) else (batch, None)
        term = self._diffusion(model, x_0, generator, cond).mean(-1)
        finite = torch.isfinite(term)
        loss = torch.where(finite, term, torch.zeros_like(term)).mean()
        return loss.float(), {"nan_rate": (~finite).float().mean()}

    def prior_kl(self) -> float:
        """KL(N(alpha_0 emb_b, sigma_0^2 I) || N(0, I)) per position (K dimensions), the same for every b."""
        s = self.schedule(torch.zeros((), dtype=torch.float64))
        a2, v = float(s.alpha**2), float(s.sigma**2)
        return 0.5 * (self.letters * (v - 1 - math.log(v)) + a2 * (1 - 1 / self.letters))

    @torch.no_grad()
    def elbo(self, model: Any, x_0: torch.Tensor, *, generator: torch.Generator, draws: int = 8, cond=None):
        """Negative ELBO in nats per position: diffusion + prior + reconstruction, and the diffusion s.e."""
        terms = torch.cat([self._diffusion(model, x_0, generator, cond).mean(-1) for _ in range(draws)])
        t = torch.full((x_0.shape[0],), self.t_hi, dtype=torch.float64, device=x_0.device)
        log_w = torch.log_softmax(self.posterior_logits(model, self._noisy(x_0, t, generator), t, cond), dim=-1)
        return elbo_summary(terms, self.prior_kl(), log_w, x_0)

    @torch.no_grad()
    def sample(
        self, model: Any, n: int, length: int, *, steps: int, generator: torch.Generator, device="cpu", cond=None
    ) -> torch.Tensor:
        """(n, length) int64: the core's ancestral (DDPM) sampler from N(0, I) at t = 0 to t_hi with the posterior
        mean embedding as the data prediction, then a draw from the posterior at t_hi."""
        device = torch.device(device)
        emb = self.emb.to(device)

        def denoiser(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
            return torch.softmax(self.posterior_logits(model, x, t, cond), dim=-1) @ emb

        x = randn((n, length, self.letters), generator=generator, device=device, dtype=torch.float64)
        grid = torch.linspace(0, self.t_hi, steps + 1, dtype=torch.float64, device=device)
        x = sample_diffusion(
            denoiser, x, grid, schedule=self.schedule, prediction="data", method="ddpm", generator=generator
        )
        t = torch.full((n,), self.t_hi, dtype=torch.float64, device=device)
        w = torch.softmax(self.posterior_logits(model, x, t, cond), dim=-1)
        return multinomial(w.reshape(-1, self.letters).float(), 1, generator=generator).reshape(n, length)
