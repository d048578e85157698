"""Wright-Fisher simplicial diffusion (issue 27), being built: so far the ancestral-lineage distribution that its exact
forward sampler draws from."""

from flowlab.biology_dynamics.wright_fisher.ancestral import (
    griffiths_moments,
    lineage_probs,
    sample_lineages,
    simulate_lineages,
)

__all__ = ["griffiths_moments", "lineage_probs", "sample_lineages", "simulate_lineages"]
