"""pi-Flow (Chen et al., ICLR 2026): few-step students that output a network-free velocity policy, distilled by
imitating the teacher along the policy's own trajectory (pi-ID); with the x0-regression and DMD-lite baselines."""

from flowlab.vision_gen.pi_flow.model import METHODS, PiFlowConfig, Student, digits_student, make_head, toy_student
from flowlab.vision_gen.pi_flow.objective import pi_id_loss, segment_grid
from flowlab.vision_gen.pi_flow.sample import sample_piflow
from flowlab.vision_gen.pi_flow.scheduler import PiFlowPipeline, PiFlowScheduler
from flowlab.vision_gen.pi_flow.store import load_student, save_student
from flowlab.vision_gen.pi_flow.train import distill, distill_digits, resampling_batches

__all__ = [
    "METHODS",
    "PiFlowConfig",
    "PiFlowPipeline",
    "PiFlowScheduler",
    "Student",
    "digits_student",
    "distill",
    "distill_digits",
    "load_student",
    "make_head",
    "pi_id_loss",
    "resampling_batches",
    "sample_piflow",
    "save_student",
    "segment_grid",
    "toy_student",
]
