"""Flow matching on the probability simplex with a clean-letter classifier, the common frame of Dirichlet FM and
linear simplex FM (Stark et al. 2024).

A conditional path p_t(x | x_0 = b) from the flat Dirichlet(1) at t = 0 towards the vertex e_b, whose conditional
velocity points at the vertex, u_t(x | b) = c_b(x, t) (e_b - x). The network reads x_t and t and returns logits of
p(x_0 | x_t) (cross-entropy training); the marginal velocity is then sum_b w_b c_b (e_b - x), w = softmax(logits),
so an Euler step x + h v = (1 - h sum_b w_b c_b) x + h sum_b w_b c_b e_b is a convex combination and stays on the
simplex while h sum_b w_b c_b <= 1. At t_hi the letters are drawn from the classifier (at a finite end time the
path is not yet at the vertices).
"""

from __future__ import annotations

from typing import Any

import torch

from flowlab.core.distributions import multinomial, rand
from flowlab.core.manifolds import Simplex
from flowlab.core.solvers import solve_ode

__all__ = ["SimplexFlow"]


class SimplexFlow:
    """Base of the simplex flows over `letters` letters, integrated over core time [0, t_hi]. Subclasses give
    `noisy(x_0, t, generator) -> x_t` and `rates(x, t) -> c`."""

    def __init__(self, letters: int, *, t_hi: float) -> None:
        if not (isinstance(letters, int) and letters >= 2):
            raise ValueError(f"letters: expected an int >= 2, got {letters!r}")
        if not 0 < t_hi <= 1:
            raise ValueError(f"t_hi: expected a time in (0, 1], got {t_hi!r}")
        self.letters, self.t_hi = letters, t_hi
        self.simplex = Simplex(letters)

    def noisy(self, x_0: torch.Tensor, t: torch.Tensor, *, generator: torch.Generator) -> torch.Tensor:
        """x_t ~ p_t(. | x_0): x_0 (B, L) int64, t (B,) -> (B, L, K) float64."""
        raise NotImplementedError

    def rates(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """c_b(x, t) of u_t(x | b) = c_b (e_b - x) for every b: x (B, L, K), t (B,) -> (B, L, K)."""
        raise NotImplementedError

    def _logits(self, model: Any, x: torch.Tensor, t: torch.Tensor, cond) -> torch.Tensor:
        out = model(x=x.float(), t=t.float(), **(cond or {}))
        if not isinstance(out, torch.Tensor) or out.shape != x.shape:
            got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            raise ValueError(f"model: expected logits of shape {tuple(x.shape)}, got {got}")
        return out

    def _check_letters(self, x_0: object) -> torch.Tensor:
        if not isinstance(x_0, torch.Tensor) or x_0.dtype != torch.long or x_0.dim() != 2:
            raise ValueError("x_0: expected (B, L) int64 letters")
        if bool(((x_0 < 0) | (x_0 >= self.letters)).any()):
            raise ValueError(f"x_0: expected letters in [0, {self.letters})")
        return x_0

    def loss_fn(self, model: Any, batch: Any, generator: torch.Generator) -> tuple[torch.Tensor, dict]:
        """For `core.train.fit`: batch x_0 (B, L) int64 or (x_0, cond) -> the cross-entropy of the classifier."""
        x_0, cond = batch if isinstance(batch, tuple) else (batch, None)
        x_0 = self._check_letters(x_0)
        t = rand((x_0.shape[0],), generator=generator, device=x_0.device, dtype=torch.float64) * self.t_hi
        x_t = self.noisy(x_0, t, generator=generator)
        finite = torch.isfinite(x_t).all(-1).all(-1)  # (B,)
        x_t = torch.where(finite[:, None, None], x_t, 1 / self.letters)
        logits = self._logits(model, x_t, t, cond)
        term = torch.nn.functional.cross_entropy(logits.transpose(1, 2), x_0, reduction="none").mean(-1)
        loss = (term * finite).sum() / finite.sum().clamp_min(1)
        return loss, {"nan_rate": (~finite).float().mean()}

    @torch.no_grad()
    def sample(
        self, model: Any, n: int, length: int, *, steps: int, generator: torch.Generator, device="cpu", cond=None
    ) -> torch.Tensor:
        """(n, length) int64 letters: Euler steps of the marginal velocity from Dirichlet(1), then a classifier draw."""
        if not (isinstance(n, int) and n > 0 and isinstance(length, int) and length > 0):
            raise ValueError(f"n, length: expected positive ints, got {n!r}, {length!r}")
        if not (isinstance(steps, int) and steps >= 1):
            raise ValueError(f"steps: expected an int >= 1, got {steps!r}")
        device = torch.device(device)
        ones = torch.ones(n, length, self.letters, dtype=torch.float64, device=device)
        x = self.simplex.random_dirichlet(n, ones, generator=generator)

        def field(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
            w = torch.softmax(self._logits(model, x, t, cond).double(), dim=-1)
            pull = w * self.rates(x, t)
            return pull - x * pull.sum(-1, keepdim=True)

        grid = torch.linspace(0, self.t_hi, steps + 1, dtype=torch.float64, device=device)
        x = self.simplex.projx(solve_ode(field, x, grid, method="euler"))
        t = torch.full((n,), self.t_hi, dtype=torch.float64, device=device)
        w = torch.softmax(self._logits(model, x, t, cond).double(), dim=-1)
        return multinomial(w.reshape(-1, self.letters).float(), 1, generator=generator).reshape(n, length)
