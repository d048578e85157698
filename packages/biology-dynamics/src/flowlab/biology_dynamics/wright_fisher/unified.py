"""The three domains behind one interface, and the unified sufficient-statistic model that serves them all.

Every domain has `loss_fn(model, batch, generator)` for `core.train.fit`, `elbo(model, x_0, generator=...)` in
nats per position and `sample(model, n, length, steps=..., generator=..., device=...)`. With `inputs="ssp"` each
feeds its network phi_b ∝ p(x_t | x_0 = b) and adds log phi to the network's logits, so one time-free network
F_theta runs discrete, Gaussian and simplicial diffusion; `UnifiedLoss` trains it on a domain drawn per batch.
"""

from __future__ import annotations

from typing import Any

import torch

from flowlab.biology_dynamics.wright_fisher.discrete import DiscreteDomain
from flowlab.biology_dynamics.wright_fisher.gaussian import GaussianDomain
from flowlab.biology_dynamics.wright_fisher.objective import WrightFisherELBO
from flowlab.biology_dynamics.wright_fisher.process import WrightFisherPath
from flowlab.biology_dynamics.wright_fisher.sample import sample_wright_fisher

__all__ = ["DOMAINS", "SimplicialDomain", "UnifiedLoss", "domain"]

DOMAINS = ("discrete", "gaussian", "simplicial")


class SimplicialDomain(WrightFisherELBO):
    """`WrightFisherELBO` with the common `sample` method (the reverse SDE)."""

    def sample(
        self, model: Any, n: int, length: int, *, steps: int, generator: torch.Generator, device="cpu", cond=None
    ):
        """Draws `n` sequences of `length` letters with `sample_wright_fisher` (the reverse SDE in `steps` steps)."""
        return sample_wright_fisher(self, model, n, length, steps=steps, generator=generator, device=device, cond=cond)


def domain(name: str, letters: int, *, ssp: bool = False) -> DiscreteDomain | GaussianDomain | SimplicialDomain:
    """The domain `name` in DOMAINS over `letters` letters, with the sufficient-statistic input when `ssp`."""
    if name == "discrete":
        return DiscreteDomain(letters, kind="uniform", inputs="ssp" if ssp else "onehot")
    if name == "gaussian":
        return GaussianDomain(letters, inputs="ssp" if ssp else "native")
    if name == "simplicial":
        return SimplicialDomain(WrightFisherPath(letters), inputs="ssp" if ssp else "simplex")
    raise ValueError(f"domain: expected one of {DOMAINS}, got {name!r}")


class UnifiedLoss:
    """For `core.train.fit`: each batch trains the shared sufficient-statistic network on one domain, drawn
    uniformly with the training generator (the paper alternates the three ELBOs)."""

    def __init__(self, letters: int) -> None:
        self.domains = tuple(domain(name, letters, ssp=True) for name in DOMAINS)

    def __call__(self, model: Any, batch: Any, generator: torch.Generator) -> tuple[torch.Tensor, dict]:
        """The `(loss, logs)` of one domain, drawn uniformly with `generator`, on `batch`."""
        pick = int(torch.randint(len(self.domains), (1,), generator=generator, device=generator.device))
        return self.domains[pick].loss_fn(model, batch, generator)
