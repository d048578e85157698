"""CNF likelihoods: the augmented-state log-likelihood with exact or Hutchinson divergence (Euclidean or
Riemannian), sampling with log-densities, and bits per dimension."""

from flowlab.core.likelihood.cnf import (
    DIVERGENCES,
    METHODS,
    AugmentedState,
    LikelihoodResult,
    SampleLikelihood,
    log_likelihood,
    sample_with_log_likelihood,
)
from flowlab.core.likelihood.divergence import (
    AUTO_EXACT_MAX_DIM,
    EXACT_MAX_DIM,
    PROBES,
    divergence_exact,
    divergence_hutchinson,
    sample_probes,
)
from flowlab.core.likelihood.metrics import bits_per_dim

__all__ = [
    "AUTO_EXACT_MAX_DIM",
    "DIVERGENCES",
    "EXACT_MAX_DIM",
    "METHODS",
    "PROBES",
    "AugmentedState",
    "LikelihoodResult",
    "SampleLikelihood",
    "bits_per_dim",
    "divergence_exact",
    "divergence_hutchinson",
    "log_likelihood",
    "sample_probes",
    "sample_with_log_likelihood",
]
