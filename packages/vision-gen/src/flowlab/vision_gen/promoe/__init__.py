"""ProMoE (Wei et al., ICLR 2026): a mixture-of-experts DiT whose router is told what to do: null-label tokens go to
an unconditional expert, the others top-1 to the expert whose prototype is most cosine-similar, beside a shared
expert, with a routing contrastive loss; with a dense DiT, token-choice and expert-choice MoE at equal activated
parameters as baselines, ablations, and routing analysis. See README.md."""

from flowlab.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "flowlab.vision_gen.promoe.analysis": [
            "contingency",
            "dead_experts",
            "expert_class_nmi",
            "routing_heatmap",
            "subspace_similarity",
            "utilisation_divergence",
            "utilisation_entropy",
        ],
        "flowlab.vision_gen.promoe.evaluate": ["RoutingAnalysis", "routing_analysis", "sample_quality"],
        "flowlab.vision_gen.promoe.experts": ["ExpertBank", "dispatch_top1"],
        "flowlab.vision_gen.promoe.layers": ["ExpertChoiceMoE", "ProMoEMLP", "TokenChoiceMoE"],
        "flowlab.vision_gen.promoe.losses": ["load_balancing_loss", "routing_contrastive_loss"],
        "flowlab.vision_gen.promoe.model": ["ModelConfig", "moe_mlp", "promoe_dit"],
        "flowlab.vision_gen.promoe.names": ["ACTIVATIONS", "OBJECTIVES", "VARIANTS"],
        "flowlab.vision_gen.promoe.routing": ["LinearRouter", "PrototypeRouter", "RoutingDecision"],
        "flowlab.vision_gen.promoe.sample": ["sample_digits"],
        "flowlab.vision_gen.promoe.store": ["load_model", "save_model"],
        "flowlab.vision_gen.promoe.train": ["TrainConfig", "promoe_loss", "train_promoe"],
    },
)
