"""Wright-Fisher simplicial diffusion (issue 27), being built: so far its exact forward process (`WrightFisherPath`)
and the ancestral-lineage distribution behind it."""

from flowlab.biology_dynamics.wright_fisher.ancestral import (
    griffiths_moments,
    lineage_probs,
    sample_lineages,
    simulate_lineages,
)
from flowlab.biology_dynamics.wright_fisher.process import WrightFisherPath

__all__ = ["WrightFisherPath", "griffiths_moments", "lineage_probs", "sample_lineages", "simulate_lineages"]
