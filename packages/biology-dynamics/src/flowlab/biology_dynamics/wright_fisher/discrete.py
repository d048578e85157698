"""The discrete domains of the comparison, on the core's discrete paths, losses and CTMC sampler: uniform-noise
diffusion (the zeta = 1 member of the paper's family) and masked diffusion (MDLM), kappa_t = t.

`inputs="onehot"`: the network reads one-hot x_t (K + 1 channels with the mask) and the time and returns the
posterior logits of x_0 (the usual parametrisation). `inputs="ssp"` (uniform only): the network reads the
sufficient statistic phi_b ∝ p(x_t | x_0 = b) = (1 - kappa) / K + kappa [b = x_t] and no time, returns mixture
logits, and the posterior is softmax(logits + log phi), the same contract as the simplicial and Gaussian domains,
so one network serves all three.
"""

from __future__ import annotations

from typing import Any, Literal

import torch

from flowlab.core.distributions import rand
from flowlab.core.losses import masked_diffusion_loss, uniform_diffusion_loss
from flowlab.core.paths import LogLinearKappa, MaskedDiscretePath, UniformDiscretePath
from flowlab.core.solvers import solve_ctmc

__all__ = ["DiscreteDomain"]


class DiscreteDomain:
    """Uniform or masked discrete diffusion over `letters` letters, for networks with `inputs` "onehot" or "ssp"."""

    def __init__(
        self,
        letters: int,
        *,
        kind: Literal["uniform", "masked"] = "uniform",
        inputs: Literal["onehot", "ssp"] = "onehot",
    ) -> None:
        if kind not in ("uniform", "masked") or inputs not in ("onehot", "ssp"):
            raise ValueError(f"kind, inputs: expected uniform|masked and onehot|ssp, got {kind!r}, {inputs!r}")
        if kind == "masked" and inputs == "ssp":
            raise ValueError("inputs: the sufficient-statistic input is defined here for the uniform path only")
        self.letters, self.kind, self.inputs = letters, kind, inputs
        kappa = LogLinearKappa(0.0)
        self.path = UniformDiscretePath(kappa, letters) if kind == "uniform" else MaskedDiscretePath(kappa, letters)
        self.channels = letters + (kind == "masked")

    def __repr__(self) -> str:
        return f"DiscreteDomain(letters={self.letters}, kind={self.kind!r}, inputs={self.inputs!r})"

    def _log_likelihood(self, x_t: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """log p(x_t | x_0 = b) for every b: (B, L, K) float64 (uniform path)."""
        kappa = t.to(torch.float64)[:, None, None]
        same = torch.nn.functional.one_hot(x_t, self.letters).to(torch.float64)
        return torch.log((1 - kappa) / self.letters + kappa * same)

    def posterior_logits(self, model: Any, x_t: torch.Tensor, t: torch.Tensor, cond=None) -> torch.Tensor:
        """Logits of p_theta(x_0 | x_t): x_t (B, L) int64, t (B,) -> (B, L, K)."""
        cond = cond or {}
        if self.inputs == "ssp":
            like = self._log_likelihood(x_t, t)
            return model(x=torch.softmax(like, dim=-1).float(), **cond).to(torch.float64) + like
        onehot = torch.nn.functional.one_hot(x_t, self.channels).float()
        out = model(x=onehot, t=t.float(), **cond)
        return out if self.kind == "uniform" else torch.cat([out, torch.zeros_like(out[..., :1])], dim=-1)

    def _terms(self, model: Any, x_0: torch.Tensor, generator: torch.Generator, cond=None) -> torch.Tensor:
        t = rand((x_0.shape[0],), generator=generator, device=x_0.device)
        source = self.path.sample_source(tuple(x_0.shape), device=x_0.device, generator=generator)
        sample = self.path.sample(source, x_0, t, generator=generator)
        logits = self.posterior_logits(model, sample.x_t, t, cond)
        if self.kind == "uniform":
            return uniform_diffusion_loss(logits, sample, self.path, reduction="none")
        return masked_diffusion_loss(logits, sample, self.path, reduction="none")

    def loss_fn(self, model: Any, batch: Any, generator: torch.Generator) -> tuple[torch.Tensor, dict]:
        """For `core.train.fit`: batch x_0 (B, L) int64 or (x_0, cond) -> the NELBO in nats per position."""
        x_0, cond = batch if isinstance(batch, tuple) else (batch, None)
        term = self._terms(model, x_0, generator, cond).mean(-1)
        finite = torch.isfinite(term)
        loss = torch.where(finite, term, torch.zeros_like(term)).mean()
        return loss.float(), {"nan_rate": (~finite).float().mean()}

    @torch.no_grad()
    def elbo(self, model: Any, x_0: torch.Tensor, *, generator: torch.Generator, draws: int = 8, cond=None):
        """Negative ELBO in nats per position (no prior term: the source is exactly uniform, or all masks)."""
        terms = torch.cat([self._terms(model, x_0, generator, cond).mean(-1) for _ in range(draws)]).double()
        se = float(terms.std() / terms.numel() ** 0.5)
        return {"nats": float(terms.mean()), "diffusion": float(terms.mean()), "diffusion_se": se}

    @torch.no_grad()
    def sample(
        self, model: Any, n: int, length: int, *, steps: int, generator: torch.Generator, device="cpu", cond=None
    ) -> torch.Tensor:
        """(n, length) int64 letters by the core's CTMC sampler on `steps` uniform steps."""
        device = torch.device(device)
        source = self.path.sample_source((n, length), device=device, generator=generator)
        grid = torch.linspace(0, 1, steps + 1, device=device)
        posterior = lambda x, t: self.posterior_logits(model, x, t, cond)  # noqa: E731
        return solve_ctmc(posterior, self.path, source, grid, generator=generator)
