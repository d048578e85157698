"""DSA's masks, their densities and FLOPs, the sparsity search, the cost model's ordering, and the tiny video DiT's
profiling and end-to-end sparse sampling at toy size."""

from __future__ import annotations

import math

import pytest
import torch

from flowlab.core.nets import TokenLayout
from flowlab.vision_gen.dsa.costs import LayerShape, attention_flops, layer_times, modelled_times
from flowlab.vision_gen.dsa.masks import (
    SparsePattern,
    head_masks,
    mask_density,
    pattern_for_sparsity,
    spatial_mask,
    temporal_mask,
)
from flowlab.vision_gen.dsa.model import VideoModelConfig, train_video_dit
from flowlab.vision_gen.dsa.quality import attention_errors, capture_heads, profile_blocks, sample_errors
from flowlab.vision_gen.dsa.reference import sparse_attention

pytestmark = pytest.mark.usefixtures("one_thread")

LAYOUT = TokenLayout(8, 4, 4)


def test_mask_densities():
    assert mask_density(spatial_mask(LAYOUT, window=0)) == pytest.approx(1 / 8)
    assert mask_density(spatial_mask(LAYOUT, window=1)) == pytest.approx(22 / 64)
    assert mask_density(temporal_mask(LAYOUT, radius=0)) == pytest.approx(1 / 16)
    with_sinks = temporal_mask(LAYOUT, radius=0, sinks=3)
    assert bool(with_sinks[:, :3].all()) and mask_density(with_sinks) > 1 / 16
    radius = spatial_mask(LAYOUT, window=0, radius=0)
    assert torch.equal(radius, torch.eye(LAYOUT.num_tokens, dtype=torch.bool))
    masks = head_masks(LAYOUT, SparsePattern(window=0, sinks=0), torch.tensor([0, 1]))
    assert attention_flops(masks, batch=2, head_dim=8) == 4 * 8 * 2 * (128 * 16 + 128 * 8)


def test_sparse_attention_masks_each_head_by_type():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 128, 4, generator=g, dtype=torch.float64) for _ in range(3))
    out = sparse_attention(q, k, v, LAYOUT, SparsePattern(window=0, sinks=0), torch.tensor([0, 1]))
    v2 = v.clone()
    v2[:, :, 16:] = 0  # frame 0's spatial head sees only frame 0; a temporal head sees every frame
    out2 = sparse_attention(q, k, v2, LAYOUT, SparsePattern(window=0, sinks=0), torch.tensor([0, 1]))
    assert torch.equal(out[:, 0, :16], out2[:, 0, :16]) and not torch.equal(out[:, 1, :16], out2[:, 1, :16])


@pytest.mark.parametrize("target", [0.75, 0.9, 0.95])
def test_pattern_for_sparsity_lands_near_target(target):
    for kind in ("spatial", "temporal"):
        p = pattern_for_sparsity(TokenLayout(8, 8, 8), kind, target)
        mask = head_masks(TokenLayout(8, 8, 8), p, torch.tensor([0 if kind == "spatial" else 1]))
        assert abs(1 - mask_density(mask) - target) < 0.1 and p.window <= 1


def test_bad_mask_arguments_named():
    with pytest.raises(ValueError, match=r"^window: expected fewer than the 8 frames"):
        spatial_mask(LAYOUT, window=8)
    with pytest.raises(ValueError, match=r"^sinks: expected at most the 128 tokens"):
        temporal_mask(LAYOUT, radius=0, sinks=129)
    with pytest.raises(ValueError, match=r"^sparsity: expected a fraction in"):
        pattern_for_sparsity(LAYOUT, "spatial", 1.0)
    with pytest.raises(ValueError, match=r"^head_type: expected"):
        pattern_for_sparsity(LAYOUT, "diagonal", 0.5)
    with pytest.raises(ValueError, match=r"^head_types: expected"):
        head_masks(LAYOUT, SparsePattern(), torch.tensor([0, 3]))
    with pytest.raises(ValueError, match=r"^mask: expected a bool"):
        mask_density(torch.ones(2, 2))


def test_cost_model_orders_schedules_and_methods():
    s = LayerShape(batch=1, heads=8, spatial_heads=4, tokens=1024, head_dim=16, sinks=4, elem_bytes=4, world_size=8,
                   reach=64)  # fmt: skip
    phases = layer_times(s, dense_seconds=1e-2, spatial_density=0.3, temporal_density=0.1, local_share=0.4,
                         bytes_per_second=1e8, latency=1e-5)  # fmt: skip
    times = modelled_times(phases)
    assert times["dsa"] <= times["dsa_naive"] < times["usp"] and times["ring"] >= 1e-2
    assert times["dense"] == pytest.approx(8e-2)


def test_video_dit_profiling_and_sparse_sampling_at_toy_size():
    cfg = VideoModelConfig(frames=4, size=8, patch=2, dim=8, depth=1, heads=2, steps=2, batch_size=2, clips=4)
    model = train_video_dit(cfg, device="cpu")
    x = torch.zeros(2, 4, 1, 8, 8)
    calls = capture_heads(model, x, 0.5, generator=torch.Generator().manual_seed(0))
    assert len(calls) == 1 and calls[0][0].shape == (2, 2, 64, 4)
    profile = profile_blocks(calls, cfg.layout, SparsePattern(sinks=0), 2, num_queries=8, seed=0)
    assert len(profile["voted"][0]) == 2 and 0 <= profile["agreement"][0] <= 1
    pattern = SparsePattern(window=0, spatial_radius=1, temporal_radius=0, sinks=0)
    errs = attention_errors(calls, cfg.layout, pattern, profile["voted"])
    assert errs["attn_err"] > 0 and 0 < errs["sparsity_spatial"] < 1
    noise = torch.randn(2, 4, 1, 8, 8, generator=torch.Generator().manual_seed(1))
    row = sample_errors(model, noise, pattern, profile["voted"], steps=2)
    assert math.isfinite(row["rel_err"]) and row["sparsity"] > 0.5
    dense = SparsePattern(window=3, sinks=0, temporal_radius=3)
    assert sample_errors(model, noise, dense, profile["voted"], steps=2)["rel_err"] < 1e-5
    with pytest.raises(ValueError, match=r"^world_size: expected a divisor of the 4 frames"):
        profile_blocks(calls, cfg.layout, pattern, 3, num_queries=8, seed=0)
