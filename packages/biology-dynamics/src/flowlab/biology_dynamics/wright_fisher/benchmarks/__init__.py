"""Scenarios of Wright-Fisher simplicial diffusion (prefix `bio.wright_fisher`)."""

from flowlab.biology_dynamics.wright_fisher.benchmarks.exactness import SCENARIO as _EXACTNESS
from flowlab.biology_dynamics.wright_fisher.benchmarks.motifs import SCENARIO as _MOTIFS
from flowlab.biology_dynamics.wright_fisher.benchmarks.simplex import SCENARIO as _SIMPLEX

SCENARIOS = (_EXACTNESS, _SIMPLEX, _MOTIFS)

__all__ = ["SCENARIOS"]
