"""Small, domain-agnostic networks: embeddings, MLPs, UNets, DiT blocks, EGNN, graph builders, wrappers and the
rectified-flow <-> EDM family adapters and the sigma <-> core-time adapters of any schedule."""

from flowlab.core.nets.dit import DiT, DiTBlock
from flowlab.core.nets.egnn import EGNNLayer, EGNNOutput
from flowlab.core.nets.embeddings import FourierFeatures, SinusoidalEmbedding
from flowlab.core.nets.family import DenoiserAsVelocity, VelocityAsDenoiser, rf_sigma, rf_time
from flowlab.core.nets.graph import knn_graph, radius_graph
from flowlab.core.nets.mlp import MLP, ManifoldMLP, TimeMLP, zero_init
from flowlab.core.nets.seeding import seeded_init
from flowlab.core.nets.sigma_time import DenoiserAsTimeModel, TimeModelAsDenoiser
from flowlab.core.nets.unet import UNet1d, UNet2d
from flowlab.core.nets.wrappers import (
    ClassifierFreeGuidance,
    ECMPreconditioner,
    EDMPreconditioner,
    PreconditionerCoefficients,
)

__all__ = [
    "MLP",
    "ClassifierFreeGuidance",
    "DenoiserAsTimeModel",
    "DenoiserAsVelocity",
    "DiT",
    "DiTBlock",
    "ECMPreconditioner",
    "EDMPreconditioner",
    "EGNNLayer",
    "EGNNOutput",
    "FourierFeatures",
    "ManifoldMLP",
    "PreconditionerCoefficients",
    "SinusoidalEmbedding",
    "TimeMLP",
    "TimeModelAsDenoiser",
    "UNet1d",
    "UNet2d",
    "VelocityAsDenoiser",
    "knn_graph",
    "radius_graph",
    "rf_sigma",
    "rf_time",
    "seeded_init",
    "zero_init",
]
