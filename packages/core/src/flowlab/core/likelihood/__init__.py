"""CNF likelihoods: the augmented-state log-likelihood with exact or Hutchinson divergence (Euclidean or
Riemannian), sampling with log-densities, and bits per dimension."""

from flowlab.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "flowlab.core.likelihood.cnf": [
            "DIVERGENCES",
            "METHODS",
            "AugmentedState",
            "LikelihoodResult",
            "SampleLikelihood",
            "log_likelihood",
            "sample_with_log_likelihood",
        ],
        "flowlab.core.likelihood.divergence": [
            "AUTO_EXACT_MAX_DIM",
            "EXACT_MAX_DIM",
            "PROBES",
            "divergence_exact",
            "divergence_hutchinson",
            "sample_probes",
        ],
        "flowlab.core.likelihood.metrics": ["bits_per_dim"],
    },
)
