"""The simplex baselines of the Wright-Fisher comparison: Dirichlet FM, linear simplex FM and DDSM-lite, each with
`loss_fn` for `core.train.fit` and `sample(model, n, length, steps=..., generator=..., device=...)`."""

from flowlab.biology_dynamics.wright_fisher.baselines.ddsm_lite import DDSMLite
from flowlab.biology_dynamics.wright_fisher.baselines.dirichlet_fm import DirichletFM, dirichlet_rate
from flowlab.biology_dynamics.wright_fisher.baselines.linear_simplex_fm import LinearSimplexFM
from flowlab.biology_dynamics.wright_fisher.baselines.simplex_flow import SimplexFlow

__all__ = ["DDSMLite", "DirichletFM", "LinearSimplexFM", "SimplexFlow", "dirichlet_rate"]
