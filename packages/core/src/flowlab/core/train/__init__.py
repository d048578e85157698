"""Training: `fit` (accumulation, clipping, EMA, checkpoint/resume, progress, DDP under torchrun), `EMA`,
tensor-only checkpoints, run folders that are never mixed (`claim_run`) and the DDP helpers."""

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
from flowlab.core.train.run_folder import RUN_FILE, claim_run, data_fingerprint

__all__ = [
    "EMA",
    "RUN_FILE",
    "DistInfo",
    "FitResult",
    "LoadedCheckpoint",
    "LossFn",
    "StepInfo",
    "claim_run",
    "data_fingerprint",
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
