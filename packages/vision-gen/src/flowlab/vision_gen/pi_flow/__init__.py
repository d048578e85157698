"""pi-Flow (Chen et al., ICLR 2026): few-step students that output a network-free velocity policy, distilled by
imitating the teacher along the policy's own trajectory (pi-ID); with the x0-regression and DMD-lite baselines."""

from flowlab.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "flowlab.vision_gen.pi_flow.model": [
            "METHODS",
            "PiFlowConfig",
            "Student",
            "digits_student",
            "make_head",
            "toy_student",
        ],
        "flowlab.vision_gen.pi_flow.objective": ["pi_id_loss", "segment_grid"],
        "flowlab.vision_gen.pi_flow.sample": ["sample_piflow"],
        "flowlab.vision_gen.pi_flow.scheduler": ["PiFlowPipeline", "PiFlowScheduler"],
        "flowlab.vision_gen.pi_flow.store": ["load_student", "save_student"],
        "flowlab.vision_gen.pi_flow.train": ["distill", "distill_digits", "resampling_batches"],
    },
)
