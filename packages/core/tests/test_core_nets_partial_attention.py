"""`partial_attention` and `merge_partials`: merging the blocks of any partition of the keys equals attention over
their union (float64, 1e-12), fully masked rows give 0 without NaN, and bad inputs are named."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from flowlab.core.nets import merge_partials, partial_attention

pytestmark = pytest.mark.usefixtures("one_thread")


def _qkv(seed: int, nq: int = 5, nk: int = 11) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(2, 3, n, 4, generator=g, dtype=torch.float64) for n in (nq, nk, nk))


def test_partial_attention_equals_sdpa():
    q, k, v = _qkv(0)
    mask = torch.rand(5, 11, generator=torch.Generator().manual_seed(1)) < 0.6
    mask[:, 0] = True
    part = partial_attention(q, k, v, mask)
    assert torch.allclose(part.out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), atol=1e-12)
    scores = (q @ k.transpose(-2, -1) / 2).masked_fill(~mask, -torch.inf)
    assert torch.allclose(part.lse, torch.logsumexp(scores, -1), atol=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_merge_of_random_partition_equals_union(seed):
    q, k, v = _qkv(seed)
    g = torch.Generator().manual_seed(100 + seed)
    mask = torch.rand(5, 11, generator=g) < 0.5
    mask[3] = False  # a row no key may reach
    block = torch.randint(3, (11,), generator=g)  # a random partition of the keys into 3 blocks (some maybe empty)
    parts = [partial_attention(q, k[..., block == b, :], v[..., block == b, :], mask[:, block == b]) for b in range(3)]
    merged, whole = merge_partials(parts), partial_attention(q, k, v, mask)
    assert not merged.out.isnan().any()
    assert torch.allclose(merged.out, whole.out, atol=1e-12) and torch.equal(merged.lse.isinf(), whole.lse.isinf())
    assert torch.equal(merged.out[..., 3, :], torch.zeros_like(merged.out[..., 3, :]))
    assert bool((merged.lse[..., 3] == -torch.inf).all())


def test_bad_inputs_named():
    q, k, v = _qkv(0)
    with pytest.raises(ValueError, match=r"^q, k, v: expected"):
        partial_attention(q, k[..., :3], v)
    with pytest.raises(ValueError, match=r"^mask: expected a bool"):
        partial_attention(q, k, v, torch.ones(5, 11))
    with pytest.raises(ValueError, match=r"^parts: expected at least one"):
        merge_partials([])
