"""Training: `fit` (accumulation, clipping, EMA, checkpoint/resume, progress, DDP under torchrun), `EMA`,
tensor-only checkpoints and the DDP helpers."""

from flowlab.core.train.checkpoint import (
    LoadedCheckpoint,
    latest_checkpoint,
    load_checkpoint,
    load_weights,
    save_checkpoint,
)
from flowlab.core.train.distributed import (
    DistInfo,
    dist_info,
    init_distributed,
    is_distributed,
    rank_generator,
    shard_batch,
    unwrap_model,
)
from flowlab.core.train.ema import EMA
from flowlab.core.train.loop import FitResult, LossFn, StepInfo, fit

__all__ = [
    "EMA",
    "DistInfo",
    "FitResult",
    "LoadedCheckpoint",
    "LossFn",
    "StepInfo",
    "dist_info",
    "fit",
    "init_distributed",
    "is_distributed",
    "latest_checkpoint",
    "load_checkpoint",
    "load_weights",
    "rank_generator",
    "save_checkpoint",
    "shard_batch",
    "unwrap_model",
]
