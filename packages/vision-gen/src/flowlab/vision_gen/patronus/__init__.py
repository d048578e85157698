"""Patronus (Weng, Feragen, Bigdeli, ICLR 2026): a DDPM conditioned in every residual block on the activations of
learned prototypes of the clean image, so what was learned, where and when it acts can be read off and shortcuts
diagnosed; with a plain DDPM of the same UNet and a DiffAE-style global-latent model as baselines, an activation
prior for unconditional sampling, and a planted-shortcut digits set. See README.md."""

from flowlab.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "flowlab.vision_gen.patronus.encoder": [
            "GlobalEncoder",
            "PrototypeEncoder",
            "PrototypeOutput",
            "activation",
            "conv_stack",
            "receptive_field",
        ],
        "flowlab.vision_gen.patronus.evaluate": [
            "conditions",
            "ddpm_quality",
            "probe_scores",
            "prototype_diversity",
            "sample_quality",
        ],
        "flowlab.vision_gen.patronus.explain": [
            "Localisation",
            "boost_and_regenerate",
            "dot_prototype",
            "emergence_curve",
            "localisation_score",
            "manipulate",
            "shortcut_shift",
        ],
        "flowlab.vision_gen.patronus.model": ["ModelConfig", "PatronusModel", "patronus_model"],
        "flowlab.vision_gen.patronus.names": ["EXPLANATIONS", "PROTO_INITS", "VARIANTS"],
        "flowlab.vision_gen.patronus.plots": ["emergence_plot", "heat_map_grid", "prototype_patches"],
        "flowlab.vision_gen.patronus.prior": ["ActivationPrior", "PriorConfig", "train_activation_prior"],
        "flowlab.vision_gen.patronus.sample": ["check_sampling", "sample_images", "sample_unconditional"],
        "flowlab.vision_gen.patronus.store": ["load_model", "save_model"],
        "flowlab.vision_gen.patronus.train": ["TrainConfig", "check_images", "train_patronus"],
    },
)
