"""Linear flow matching on the simplex (the baseline of Stark et al. 2024): x_t = (1 - t) x_src + t e_(x_0) with
x_src ~ Dirichlet(1), so u_t(x | b) = (e_b - x) / (1 - t). Its conditional paths for different letters overlap
less and less as t grows (x_b >= t), the failure Dirichlet FM was designed to fix."""

from __future__ import annotations

import torch

from flowlab.biology_dynamics.wright_fisher.baselines.simplex_flow import SimplexFlow

__all__ = ["LinearSimplexFM"]


class LinearSimplexFM(SimplexFlow):
    """Linear simplex FM over `letters` letters, integrated to `t_hi` < 1."""

    def __init__(self, letters: int, *, t_hi: float = 0.999) -> None:
        if not 0 < t_hi < 1:
            raise ValueError(f"t_hi: expected a time in (0, 1) (the velocity is 1 / (1 - t)), got {t_hi!r}")
        super().__init__(letters, t_hi=t_hi)

    def __repr__(self) -> str:
        return f"LinearSimplexFM(letters={self.letters}, t_hi={self.t_hi})"

    def noisy(self, x_0: torch.Tensor, t: torch.Tensor, *, generator: torch.Generator) -> torch.Tensor:
        """x_t = `(1 - t) x_src + t e_{x_0}` with x_src ~ Dirichlet(1): x_0: (B, L) int64, t: (B,) -> (B, L, K)
        float64."""
        ones = torch.ones(*x_0.shape, self.letters, dtype=torch.float64, device=x_0.device)
        source = self.simplex.random_dirichlet(x_0.shape[0], ones, generator=generator)
        vertex = torch.nn.functional.one_hot(x_0, self.letters).to(torch.float64)
        s = t.to(torch.float64)[:, None, None]
        return (1 - s) * source + s * vertex

    def rates(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """The linear path's rate `1 / (1 - t)` for every letter: x: (B, L, K), t: (B,) -> (B, L, K)."""
        return (1 / (1 - t.to(x.dtype)))[:, None, None].expand_as(x)
