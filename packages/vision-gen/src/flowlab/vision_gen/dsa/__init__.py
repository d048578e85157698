"""DSA (Li et al., ICLR 2026): distributed sparse attention for video diffusion transformers. Heads are profiled
locally and typed spatial or temporal by a global vote; spatial heads run a partial ring with attention-sink
transfers and online-softmax merging, temporal heads Ulysses all-to-all, in a dynamic schedule; exact with respect
to single-device sparse attention. With ring, Ulysses and USP baselines, a counting communicator, closed-form costs
and a tiny video DiT on moving digits. See README.md."""

from flowlab.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "flowlab.vision_gen.dsa.comm": ["CommRecord", "Communicator", "CountingCommunicator", "Pending"],
        "flowlab.vision_gen.dsa.costs": ["LayerShape", "attention_flops", "comm_closed_form", "layer_times",
                                         "model_layer", "modelled_times", "time_dense_attention"],
        "flowlab.vision_gen.dsa.dsa": ["DistributedSparseAttention", "check_shardable"],
        "flowlab.vision_gen.dsa.evaluate": ["CheckConfig", "check_rank", "run_check"],
        "flowlab.vision_gen.dsa.masks": ["SparsePattern", "head_masks", "mask_density", "pattern_for_sparsity",
                                         "spatial_mask", "temporal_mask"],
        "flowlab.vision_gen.dsa.model": ["MaskedAttention", "RecordingAttention", "VideoModelConfig", "sample_video",
                                         "set_attention", "train_video_dit"],
        "flowlab.vision_gen.dsa.names": ["ALL_TO_ALL", "BACKENDS", "HEAD_TYPES", "METHODS", "SCHEDULES"],
        "flowlab.vision_gen.dsa.profiling": ["classify_heads_local", "majority_vote", "planted_qkv", "profile_heads"],
        "flowlab.vision_gen.dsa.quality": ["attention_errors", "capture_heads", "profile_blocks", "sample_errors",
                                           "sparsity_pattern"],
        "flowlab.vision_gen.dsa.reference": ["dense_attention", "sparse_attention"],
        "flowlab.vision_gen.dsa.scaling": ["time_layer"],
        "flowlab.vision_gen.dsa.sequence_parallel": ["UlyssesStep", "head_splits", "ring_attention",
                                                     "ulysses_attention", "usp_attention", "usp_communicators"],
    },
)  # fmt: skip
