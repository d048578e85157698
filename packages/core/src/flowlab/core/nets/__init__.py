"""Small, domain-agnostic networks: embeddings, MLPs, UNets, DiT blocks, EGNN, graph builders, wrappers and the
rectified-flow <-> EDM family adapters and the sigma <-> core-time adapters of any schedule."""

from flowlab.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "flowlab.core.nets.dit": ["DiT", "DiTBlock"],
        "flowlab.core.nets.egnn": ["EGNNLayer", "EGNNOutput"],
        "flowlab.core.nets.embeddings": ["FourierFeatures", "SinusoidalEmbedding"],
        "flowlab.core.nets.family": ["DenoiserAsVelocity", "VelocityAsDenoiser", "rf_sigma", "rf_time"],
        "flowlab.core.nets.graph": ["knn_graph", "radius_graph"],
        "flowlab.core.nets.mlp": ["MLP", "ManifoldMLP", "TimeMLP", "zero_init"],
        "flowlab.core.nets.seeding": ["seeded_init"],
        "flowlab.core.nets.sigma_time": ["DenoiserAsTimeModel", "TimeModelAsDenoiser"],
        "flowlab.core.nets.unet": ["UNet1d", "UNet2d"],
        "flowlab.core.nets.wrappers": [
            "ClassifierFreeGuidance",
            "ECMPreconditioner",
            "EDMPreconditioner",
            "PreconditionerCoefficients",
        ],
    },
)
