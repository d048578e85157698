"""Scenarios of Wright-Fisher simplicial diffusion (prefix `bio.wright_fisher`)."""

from flowlab.biology_dynamics.wright_fisher.benchmarks.exactness import SCENARIO as _EXACTNESS
from flowlab.biology_dynamics.wright_fisher.benchmarks.motifs import SCENARIO as _MOTIFS
from flowlab.biology_dynamics.wright_fisher.benchmarks.simplex import SCENARIO as _SIMPLEX
from flowlab.biology_dynamics.wright_fisher.benchmarks.simplex import SCENARIO_100 as _SIMPLEX_100

SCENARIOS = (_EXACTNESS, _SIMPLEX, _SIMPLEX_100, _MOTIFS)

__all__ = ["SCENARIOS"]
