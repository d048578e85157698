"""Training: `fit` (accumulation, clipping, EMA, checkpoint/resume, progress, DDP under torchrun), `EMA`,
tensor-only checkpoints, run folders that are never mixed (`claim_run`), the optimiser settings every training config
shares (`TrainSettings`), the DDP helpers and `spawn_gloo` (local Gloo process groups for tests and benchmarks)."""

from flowlab.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "flowlab.core.train.checkpoint": [
            "LoadedCheckpoint",
            "cpu_state_dict",
            "latest_checkpoint",
            "load_checkpoint",
            "load_weights",
            "save_checkpoint",
        ],
        "flowlab.core.train.distributed": [
            "DistInfo",
            "dist_info",
            "init_distributed",
            "is_distributed",
            "rank_generator",
            "shard_batch",
            "unwrap_model",
        ],
        "flowlab.core.train.ema": ["EMA"],
        "flowlab.core.train.loop": ["FitResult", "LossFn", "StepInfo", "fit"],
        "flowlab.core.train.run_folder": ["RUN_FILE", "claim_run", "data_fingerprint"],
        "flowlab.core.train.settings": ["TrainSettings"],
        "flowlab.core.train.spawn": ["RankError", "spawn_gloo"],
    },
)
