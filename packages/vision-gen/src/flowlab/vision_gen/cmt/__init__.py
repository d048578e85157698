"""Consistency Mid-Training (CMT, Hu et al., ICLR 2026): regress every state of a diffusion teacher's DPM-Solver++
trajectory onto its endpoint (or, for MeanFlow, onto average velocities along it), then post-train a consistency
model (ECT) or a MeanFlow model from that initialisation; with random and diffusion initialisations, ECT's doubling
schedule and consistency distillation as baselines, few-step sampling, and the gradient bias at initialisation.
See README.md."""

from flowlab.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "flowlab.vision_gen.cmt.evaluate": [
            "GradientBias",
            "Quality",
            "few_step_quality",
            "few_step_samples",
            "gradient_bias",
            "oracle_endpoint",
            "quality",
        ],
        "flowlab.vision_gen.cmt.meanflow": [
            "IntervalClassDiT",
            "MeanFlowStudent",
            "cmt_meanflow_loss",
            "meanflow_post_loss",
            "meanflow_samples",
            "meanflow_student",
        ],
        "flowlab.vision_gen.cmt.model": [
            "BRANCHES",
            "INITS",
            "METRICS",
            "POST_METHODS",
            "MidConfig",
            "PostConfig",
            "consistency_student",
        ],
        "flowlab.vision_gen.cmt.objective": [
            "Trajectories",
            "cmt_loss",
            "distance",
            "post_loss",
            "teacher_trajectories",
        ],
        "flowlab.vision_gen.cmt.train": ["Student", "TrainResult", "mid_train", "post_train"],
    },
)
