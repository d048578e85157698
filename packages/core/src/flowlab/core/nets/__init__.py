"""Small, domain-agnostic networks: embeddings, MLPs, UNets, DiT blocks (pluggable attention and MLPs, class labels),
an image and a video DiT, EGNN, graph builders, wrappers and the rectified-flow <-> EDM family adapters and the
sigma <-> core-time adapters of any schedule."""

from flowlab.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "flowlab.core.nets.attention": ["AttentionFn", "TokenLayout", "sdpa_attention"],
        "flowlab.core.nets.dit": [
            "BlockOutput",
            "ContextMLP",
            "DiT",
            "DiTBlock",
            "DiTOutput",
            "MLPFactory",
            "MLPOutput",
            "TokenContext",
            "dense_mlp",
        ],
        "flowlab.core.nets.egnn": ["EGNNLayer", "EGNNOutput"],
        "flowlab.core.nets.embeddings": ["FourierFeatures", "SinusoidalEmbedding"],
        "flowlab.core.nets.family": ["DenoiserAsVelocity", "VelocityAsDenoiser", "rf_sigma", "rf_time"],
        "flowlab.core.nets.graph": ["knn_graph", "radius", "radius_graph"],
        "flowlab.core.nets.labels": ["check_labels", "drop_labels"],
        "flowlab.core.nets.lora": ["RoutedLoRA", "attach_routed_lora"],
        "flowlab.core.nets.mlp": ["MLP", "ManifoldMLP", "TimeMLP", "zero_init"],
        "flowlab.core.nets.partial_attention": ["PartialAttention", "merge_partials", "partial_attention"],
        "flowlab.core.nets.seeding": ["seeded_init"],
        "flowlab.core.nets.sigma_time": ["DenoiserAsTimeModel", "TimeModelAsDenoiser"],
        "flowlab.core.nets.unet": ["UNet1d", "UNet2d"],
        "flowlab.core.nets.video_dit": ["VideoDiT"],
        "flowlab.core.nets.wrappers": [
            "ClassifierFreeGuidance",
            "ECMPreconditioner",
            "EDMPreconditioner",
            "PreconditionerCoefficients",
        ],
    },
)
