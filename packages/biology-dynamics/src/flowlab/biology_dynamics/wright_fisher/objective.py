"""The Wright-Fisher ELBO (the paper's Alg. 4 on the exact lineage-mixture density) and its training loss.

The network returns per-position logits of mixture weights x_hat_0; the model's density at a position is
sum_c x_hat_0,c p(x_t | c), so its posterior over the clean letter is w = softmax(logits + log R(x_t)) and its
score is w_c E[m | x, c] / x_c along e_c. With u = (e_{x_0} - w) * E[m | x, .], the diffusion term per position is

    (beta(s) / 2) (sum_c x_c d_c^2 - (sum_c x_c d_c)^2) = (beta(s) / 2) (sum_c u_c^2 / x_c - (sum_c u_c)^2),

d = s(x_t | x_0) - s(x_t | x_hat_0), the squared norm in the Wright-Fisher metric diag(x) - x x^T, beta = d tau / ds,
paper time s ~ U[s_min, t_max]. s_min is where tau = tau_min (default 0.01): below it the bound's reconstruction
term -log w_{x_0}(x_{s_min}) takes over (near 0 for any sensible model: 200 lineages at tau = 0.01 pin x to its
vertex), and above t_max the prior term KL(p(x_{t_max} | x_0) || Dirichlet(psi pi)), the same for every letter (its
closed-form convexity bound, see `prior_kl`). Nats per position: diffusion + prior + reconstruction.

`inputs="simplex"` feeds the network (x_t, t); `inputs="ssp"` feeds the sufficient statistic phi_b ∝ R_b(x_t)
(normalised over b) and no time, the parametrisation one network shares across domains. A hollow network (see
`hollow.py`) never sees x_t at its own position, so the likelihood enters only through log R.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import torch

from flowlab.biology_dynamics.wright_fisher.likelihood import lineage_posterior, log_ratio
from flowlab.biology_dynamics.wright_fisher.process import WrightFisherPath
from flowlab.biology_dynamics.wright_fisher.table import lineage_table
from flowlab.core.distributions import rand

__all__ = ["NoisyBatch", "WrightFisherELBO", "elbo_summary", "metric_norm"]


def elbo_summary(diffusion: torch.Tensor, prior: float, log_w: torch.Tensor, x_0: torch.Tensor) -> dict[str, float]:
    """The negative ELBO's report in nats per position, shared by the likelihood domains: diffusion (B draws,) with
    its standard error, the prior term, the reconstruction -log w_{x_0} from log_w (B, L, K) at the last time, and
    their sum `nats`."""
    out = {
        "diffusion": float(diffusion.mean()),
        "diffusion_se": float(diffusion.std() / math.sqrt(diffusion.numel())),
        "prior": prior,
        "reconstruction": float(-log_w.gather(-1, x_0.unsqueeze(-1)).mean()),
    }
    out["nats"] = out["diffusion"] + out["prior"] + out["reconstruction"]
    return out


def metric_norm(u: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """d^T (diag(x) - x x^T) d with u = x * d, computed as sum u^2 / x - (sum u)^2: (..., K) -> (...)."""
    return (u * u / x.clamp_min(torch.finfo(x.dtype).tiny)).sum(-1) - u.sum(-1) ** 2


@dataclass(frozen=True)
class NoisyBatch:
    """One forward draw: t (B,) core times, tau and beta = d tau / ds (B,), x_t (B, L, K) float64, q (B, M) the
    lineage law at each tau."""

    t: torch.Tensor
    tau: torch.Tensor
    beta: torch.Tensor
    x_t: torch.Tensor
    q: torch.Tensor


class WrightFisherELBO:
    """The ELBO of `path` for networks with `inputs` "simplex" or "ssp"; `tau_min` ends the diffusion term."""

    def __init__(
        self, path: WrightFisherPath, *, inputs: Literal["simplex", "ssp"] = "simplex", tau_min: float = 0.01
    ) -> None:
        if not isinstance(path, WrightFisherPath):
            raise ValueError(f"path: expected a WrightFisherPath, got {type(path).__name__}")
        if inputs not in ("simplex", "ssp"):
            raise ValueError(f"inputs: expected 'simplex' or 'ssp', got {inputs!r}")
        self.path, self.inputs = path, inputs
        self.s_min = -math.expm1(-path.psi * tau_min / 2)
        if not 0 < self.s_min < path.t_max:
            raise ValueError(f"tau_min: expected a time inside the path's range, got {tau_min!r}")
        self.t_hi = 1 - self.s_min / path.t_max  # core time of tau_min
        self.tau_min = tau_min
        self.table = lineage_table(path.psi, tau_min, float(path.tau(torch.zeros(1))[0]))

    def __repr__(self) -> str:
        return f"WrightFisherELBO({self.path!r}, inputs={self.inputs!r}, tau_min={self.tau_min:g})"

    def noisy(self, x_0: torch.Tensor, t: torch.Tensor, *, generator: torch.Generator) -> NoisyBatch:
        """x_0 (B, L) int64, t (B,) core times in [0, t_hi] -> a `NoisyBatch` (draws through the table)."""
        tau = self.path.tau(t).to(x_0.device)
        q = self.table.probs(tau)
        lineages = self.table.sample(q, generator=generator, per_row=x_0.shape[1])
        x_t = self.path.draw(x_0, lineages, generator=generator)
        s = (1 - t.to(torch.float64)) * self.path.t_max
        beta = (2 / self.path.psi) / (1 - s)
        return NoisyBatch(t=t, tau=tau, beta=beta.to(x_0.device), x_t=x_t, q=q)

    def logits(self, model: Any, batch: NoisyBatch, cond: dict[str, Any] | None = None) -> torch.Tensor:
        """The network's mixture-weight logits (B, L, K) float64 for a noisy batch."""
        x = batch.x_t
        cond = cond or {}
        if self.inputs == "ssp":
            phi = torch.softmax(log_ratio(x, batch.q, self.path.psi), dim=-1)
            out = model(x=phi.float(), **cond)
        else:
            out = model(x=x.float(), t=batch.t.to(x.device).float(), **cond)
        if not isinstance(out, torch.Tensor) or out.shape != x.shape:
            got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            raise ValueError(f"model: expected logits of shape {tuple(x.shape)}, got {got}")
        return out.to(torch.float64)

    def diffusion_term(self, logits: torch.Tensor, x_0: torch.Tensor, batch: NoisyBatch) -> torch.Tensor:
        """The integrand (t_max - s_min) (beta / 2) ||d||^2 per position: (B, L) float64 nats."""
        log_r, lineages = lineage_posterior(batch.x_t, batch.q, self.path.psi)
        w = torch.softmax(logits + log_r, dim=-1)
        onehot = torch.nn.functional.one_hot(x_0, self.path.letters).to(w)
        u = (onehot - w) * lineages
        width = self.path.t_max - self.s_min
        return width * batch.beta[:, None] / 2 * metric_norm(u, batch.x_t)

    def sample_times(self, n: int, *, generator: torch.Generator, device=None) -> torch.Tensor:
        """Core times with paper time s ~ U[s_min, t_max]: (n,) float64."""
        u = rand((n,), generator=generator, device=device, dtype=torch.float64)
        return u * self.t_hi

    def loss_fn(self, model: Any, batch: Any, generator: torch.Generator) -> tuple[torch.Tensor, dict]:
        """For `core.train.fit`: batch x_0 (B, L) int64 or (x_0, cond dict) -> the diffusion term in nats per
        position (the ELBO's part that depends on the model, bar the near-zero reconstruction); logs `nan_rate`,
        the share of sequences whose term is not finite (counted, then left out of the step)."""
        x_0, cond = batch if isinstance(batch, tuple) else (batch, None)
        noisy = self.noisy(
            x_0, self.sample_times(x_0.shape[0], generator=generator, device=x_0.device), generator=generator
        )
        term = self.diffusion_term(self.logits(model, noisy, cond), x_0, noisy).mean(-1)
        finite = torch.isfinite(term)
        loss = torch.where(finite, term, torch.zeros_like(term)).mean()
        return loss.float(), {"nan_rate": (~finite).float().mean()}

    def prior_kl(self) -> float:
        """The prior term per position, KL(p(x_{t_max} | x_0) || Dirichlet(psi pi)), bounded above by joint convexity
        by sum_m q_m KL(Dirichlet(psi pi + m e_b) || Dirichlet(psi pi)) = sum_m q_m KL(Beta(a + m, c) || Beta(a, c)),
        a = psi pi_b, c = psi - a: closed form, the same for every letter, and the bound stays a bound."""
        psi = self.path.psi
        a, c = psi / self.path.letters, psi - psi / self.path.letters
        q = self.table.probs(self.path.tau(torch.zeros(1)))[0]
        m = torch.arange(q.shape[0], dtype=torch.float64)
        lg, dg = torch.lgamma, torch.digamma
        log_beta = lambda u, v: lg(u) + lg(v) - lg(u + v)  # noqa: E731
        a_t, c_t = torch.tensor(a, dtype=torch.float64), torch.tensor(c, dtype=torch.float64)
        kl = log_beta(a_t, c_t) - log_beta(a + m, c_t) + m * (dg(a + m) - dg(a + m + c))
        return float((q * kl).sum())

    @torch.no_grad()
    def elbo(
        self, model: Any, x_0: torch.Tensor, *, generator: torch.Generator, draws: int = 8, cond=None
    ) -> dict[str, float]:
        """Negative ELBO in nats per position over `x_0` (B, L), `draws` time draws per sequence: the three terms,
        their sum `nats`, and the standard error of the diffusion term."""
        terms = []
        for _ in range(draws):
            noisy = self.noisy(
                x_0, self.sample_times(x_0.shape[0], generator=generator, device=x_0.device), generator=generator
            )
            terms.append(self.diffusion_term(self.logits(model, noisy, cond), x_0, noisy).mean(-1))
        diffusion = torch.cat(terms)
        end = self.noisy(x_0, torch.full((x_0.shape[0],), self.t_hi, dtype=torch.float64), generator=generator)
        log_w = torch.log_softmax(self.logits(model, end, cond) + log_ratio(end.x_t, end.q, self.path.psi), dim=-1)
        return elbo_summary(diffusion, self.prior_kl(), log_w, x_0)
