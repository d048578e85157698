"""Consistency Mid-Training (CMT, Hu et al., ICLR 2026): regress every state of a diffusion teacher's DPM-Solver++
trajectory onto its endpoint (or, for MeanFlow, onto average velocities along it), then post-train a consistency
model (ECT) or a MeanFlow model from that initialisation; with random and diffusion initialisations, ECT's doubling
schedule and consistency distillation as baselines, few-step sampling, and the gradient bias at initialisation.
See README.md."""

from flowlab.vision_gen.cmt.evaluate import (
    GradientBias,
    Quality,
    few_step_quality,
    few_step_samples,
    gradient_bias,
    oracle_endpoint,
    quality,
)
from flowlab.vision_gen.cmt.meanflow import (
    IntervalClassDiT,
    MeanFlowStudent,
    cmt_meanflow_loss,
    meanflow_post_loss,
    meanflow_samples,
    meanflow_student,
)
from flowlab.vision_gen.cmt.model import (
    BRANCHES,
    INITS,
    METRICS,
    POST_METHODS,
    MidConfig,
    PostConfig,
    consistency_student,
)
from flowlab.vision_gen.cmt.objective import Trajectories, cmt_loss, distance, post_loss, teacher_trajectories
from flowlab.vision_gen.cmt.train import Student, TrainResult, mid_train, post_train

__all__ = [
    "BRANCHES",
    "INITS",
    "METRICS",
    "POST_METHODS",
    "GradientBias",
    "IntervalClassDiT",
    "MeanFlowStudent",
    "MidConfig",
    "PostConfig",
    "Quality",
    "Student",
    "TrainResult",
    "Trajectories",
    "cmt_loss",
    "cmt_meanflow_loss",
    "consistency_student",
    "distance",
    "few_step_quality",
    "few_step_samples",
    "gradient_bias",
    "meanflow_post_loss",
    "meanflow_samples",
    "meanflow_student",
    "mid_train",
    "oracle_endpoint",
    "post_loss",
    "post_train",
    "quality",
    "teacher_trajectories",
]
