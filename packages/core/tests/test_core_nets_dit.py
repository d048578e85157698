"""The DiT's pieces for the vision methods: class labels with a null label and seeded label dropout (classifier-free
guidance), per-block MLP factories with auxiliary losses and statistics, pluggable attention, the video DiT."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from flowlab.core.nets import (
    ContextMLP,
    DiT,
    DiTBlock,
    DiTOutput,
    MLPOutput,
    TokenContext,
    TokenLayout,
    VideoDiT,
    dense_mlp,
    drop_labels,
)

pytestmark = pytest.mark.usefixtures("one_thread")  # the core plugin's: tiny networks run fastest on one thread


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _perturb(net: nn.Module, std: float = 0.1, seed: int = 1) -> nn.Module:
    """Move every parameter off its (zero) initialisation, so gates and outputs are live."""
    g = _gen(seed)
    with torch.no_grad():
        for p in net.parameters():
            p.add_(std * torch.randn(p.shape, generator=g))
    return net


def _softmax_attention(q, k, v, *, mask=None, layout=None):
    """Attention written out: softmax(q k^T / sqrt(Dh)) v, q, k, v: (B, H, N, Dh)."""
    scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask
    return scores.softmax(-1) @ v


# ------------------------------------------------------------------------------------------- default path


def test_default_dit_is_unchanged_parameters_and_outputs():
    """Numbers recorded with the DiT before labels, factories and pluggable attention were added (same seed)."""
    torch.manual_seed(0)
    net = DiT(8, 2, 3, 32, 2, 4, out_channels=2, cond_dim=4)
    block_keys = [f"blocks.{i}.{name}" for i in range(2) for name in (
        "qkv.weight", "qkv.bias", "proj.weight", "proj.bias", "mlp.0.weight", "mlp.0.bias", "mlp.2.weight",
        "mlp.2.bias", "modulation.weight", "modulation.bias")]  # fmt: skip
    assert list(net.state_dict()) == [
        "patchify.weight", "patchify.bias", "time_embed.1.weight", "time_embed.1.bias", "time_embed.3.weight",
        "time_embed.3.bias", "cond_embed.weight", "cond_embed.bias", *block_keys, "modulation_out.weight",
        "modulation_out.bias", "out.weight", "out.bias",
    ]  # fmt: skip
    flat = torch.cat([v.flatten().double() for v in net.state_dict().values()])
    ramp = torch.arange(flat.numel(), dtype=torch.float64) / flat.numel()
    assert flat.numel() == 42888
    assert float(flat.sum()) == pytest.approx(19.760187106434387, rel=1e-12)
    assert float((flat * ramp).sum()) == pytest.approx(12.192089219375054, rel=1e-12)  # the order of the draws
    g = _gen(1)  # one stream: the perturbation, then the inputs
    with torch.no_grad():
        for p in net.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=g))
    x, t, c = torch.randn(2, 3, 8, 8, generator=g), torch.rand(2, generator=g), torch.randn(2, 4, generator=g)
    with torch.no_grad():
        out = net(x=x, t=t, cond=c).double()
    assert float(out.sum()) == pytest.approx(37.60413602227345, rel=1e-5)
    assert float((out * torch.arange(out.numel()).reshape(out.shape)).sum()) == pytest.approx(
        4205.857354762498, rel=1e-5
    )


def test_a_factory_of_dense_mlps_is_the_default_network():
    torch.manual_seed(3)
    default = DiT(8, 2, 1, 16, 2, 2)
    built = DiT(8, 2, 1, 16, 2, 2, mlp_factory=lambda i, width, hidden: dense_mlp(width, hidden))
    assert list(built.state_dict()) == list(default.state_dict())
    built.load_state_dict(_perturb(default).state_dict())
    x, t = torch.randn(3, 1, 8, 8, generator=_gen()), torch.rand(3, generator=_gen(1))
    torch.testing.assert_close(built(x=x, t=t), default(x=x, t=t), rtol=0, atol=0)


# ----------------------------------------------------------------------------------------------- attention


def test_hand_written_attention_matches_the_default():
    torch.manual_seed(0)
    default = _perturb(DiT(8, 2, 2, 32, 2, 4, num_classes=3))
    written = DiT(8, 2, 2, 32, 2, 4, num_classes=3, attention=_softmax_attention)
    written.load_state_dict(default.state_dict())
    x, t, y = torch.randn(4, 2, 8, 8, generator=_gen()), torch.rand(4, generator=_gen(1)), torch.tensor([0, 1, 2, 3])
    torch.testing.assert_close(written(x=x, t=t, y=y), default(x=x, t=t, y=y), rtol=0, atol=1e-5)
    # and in a bare block, with a key-padding mask
    block = _perturb(DiTBlock(16, 4))
    hand = DiTBlock(16, 4, attention=_softmax_attention)
    hand.load_state_dict(block.state_dict())
    h, c = torch.randn(3, 5, 16, generator=_gen(2)), torch.randn(3, 16, generator=_gen(3))
    mask = torch.tensor([True, True, True, False, False])[None, None, None, :]
    torch.testing.assert_close(hand(h, c, attn_mask=mask), block(h, c, attn_mask=mask), rtol=0, atol=1e-5)


def test_attention_receives_the_token_layout_and_a_wrong_output_is_refused():
    seen = []

    def recording(q, k, v, *, mask=None, layout=None):
        seen.append((q.shape, layout))
        return _softmax_attention(q, k, v, mask=mask)

    net = DiT(8, 2, 1, 16, 2, 2, attention=recording)
    net(x=torch.randn(2, 1, 8, 8), t=torch.rand(2))
    assert seen == [((2, 2, 16, 8), TokenLayout(1, 4, 4))] * 2
    bad = DiTBlock(16, 2, attention=lambda q, k, v, *, mask, layout: q[..., :4])
    with pytest.raises(ValueError, match="attention"):
        bad(torch.randn(2, 5, 16), torch.randn(2, 16))
    with pytest.raises(ValueError, match="attention"):
        DiTBlock(16, 2, attention="flash")
    with pytest.raises(ValueError, match="context"):
        DiTBlock(16, 2)(torch.randn(2, 5, 16), torch.randn(2, 16), context=TokenContext(layout=TokenLayout(1, 2, 2)))


# ------------------------------------------------------------------------------------------------- labels


def test_labels_condition_the_output_and_none_is_the_null_label():
    torch.manual_seed(0)
    net = _perturb(DiT(8, 2, 1, 16, 2, 2, num_classes=4)).eval()
    x, t = torch.randn(3, 1, 8, 8, generator=_gen()), torch.rand(3, generator=_gen(1))
    assert net.null_label == 4 and net.label_embed.num_embeddings == 5
    a, b = net(x=x, t=t, y=torch.tensor([0, 1, 2])), net(x=x, t=t, y=torch.tensor([3, 1, 2]))
    assert (a[0] - b[0]).abs().max() > 1e-4 and torch.equal(a[1:], b[1:])  # each sample reads its own label
    torch.testing.assert_close(net(x=x, t=t), net(x=x, t=t, y=torch.full((3,), 4)), rtol=0, atol=0)


def test_labels_are_checked():
    net = DiT(8, 2, 1, 16, 1, 2, num_classes=4)
    x, t = torch.randn(2, 1, 8, 8), torch.rand(2)
    for y in (torch.tensor([0, 5]), torch.tensor([-1, 0]), torch.tensor([0.0, 1.0]), torch.tensor([0, 1, 2]), [0, 1]):
        with pytest.raises(ValueError, match="y:"):
            net(x=x, t=t, y=y)
    with pytest.raises(ValueError, match="y:"):
        DiT(8, 2, 1, 16, 1, 2)(x=x, t=t, y=torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="null_label"):
        DiT(8, 2, 1, 16, 1, 2).null_label  # noqa: B018
    bad = [
        ({"num_classes": -1}, "num_classes"),
        ({"num_classes": 4, "class_dropout": 1.0}, "class_dropout"),
        ({"class_dropout": 0.1}, "class_dropout"),
        ({"mlp_factory": 3}, "mlp_factory"),
    ]
    for kwargs, name in bad:
        with pytest.raises(ValueError, match=name):
            DiT(8, 2, 1, 16, 1, 2, **kwargs)


def test_drop_labels_rate_and_seed():
    y = torch.arange(20_000) % 10
    dropped = drop_labels(y, 0.1, null_label=10, generator=_gen(5))
    is_null = dropped == 10
    assert abs(is_null.double().mean().item() - 0.1) < 0.006  # 3 sigma of a Binomial(20000, 0.1) rate is 0.0064
    assert torch.equal(dropped[~is_null], y[~is_null])
    assert torch.equal(drop_labels(y, 0.1, null_label=10, generator=_gen(5)), dropped)
    assert torch.equal(drop_labels(y, 0.0, null_label=10, generator=_gen(5)), y)
    with pytest.raises(ValueError, match="p:"):
        drop_labels(y, 1.5, null_label=10, generator=_gen())
    with pytest.raises(ValueError, match="generator"):
        drop_labels(y, 0.1, null_label=10, generator=None)


def test_class_dropout_in_training_mode_only_seeded_and_equal_to_the_null_label():
    torch.manual_seed(0)
    net = _perturb(DiT(8, 2, 1, 16, 2, 2, num_classes=4, class_dropout=0.5))
    x, t, y = torch.randn(16, 1, 8, 8, generator=_gen()), torch.rand(16, generator=_gen(1)), torch.arange(16) % 4
    with pytest.raises(ValueError, match="generator"):
        net(x=x, t=t, y=y)
    trained = net(x=x, t=t, y=y, generator=_gen(7))
    torch.testing.assert_close(net(x=x, t=t, y=y, generator=_gen(7)), trained, rtol=0, atol=0)
    dropped = drop_labels(y, 0.5, null_label=4, generator=_gen(7))  # the draws the network made
    assert 0 < int((dropped == 4).sum()) < 16
    net.eval()
    torch.testing.assert_close(net(x=x, t=t, y=dropped), trained, rtol=0, atol=1e-6)
    assert (net(x=x, t=t, y=y) - trained).abs().max() > 1e-4  # no dropout in eval mode


def test_guided_field_is_one_batched_call_on_cond_and_null_labels():
    torch.manual_seed(0)
    net = _perturb(DiT(8, 2, 1, 16, 2, 2, num_classes=4)).eval()
    x, t, y = torch.randn(3, 1, 8, 8, generator=_gen()), torch.rand(3, generator=_gen(1)), torch.tensor([0, 2, 3])
    cond, null = net(x=x, t=t, y=y), net(x=x, t=t)
    torch.testing.assert_close(net.guided(1.0)(x=x, t=t, y=y), cond, rtol=0, atol=1e-6)
    torch.testing.assert_close(net.guided(0.0)(x=x, t=t, y=y), null, rtol=0, atol=1e-6)
    torch.testing.assert_close(net.guided(2.5)(x=x, t=t, y=y), null + 2.5 * (cond - null), rtol=0, atol=1e-5)
    with pytest.raises(ValueError, match="null_label"):
        DiT(8, 2, 1, 16, 1, 2).guided(2.0)


# ------------------------------------------------------------------------------- MLP factory, aux outputs


class _LabelMLP(ContextMLP):
    """A stand-in for a mixture of experts: the dense MLP plus a per-label bias, an auxiliary loss and statistics."""

    def __init__(self, width: int, hidden: int, num_classes: int) -> None:
        super().__init__()
        self.dense = dense_mlp(width, hidden)
        self.bias = nn.Embedding(num_classes + 1, width)

    def forward(self, x, *, context):
        labels = context.labels
        null_tokens = (labels == context.null_label).sum() * x.shape[1]
        return MLPOutput(
            self.dense(x) + self.bias(labels)[:, None],
            aux_losses={"l2": x.pow(2).mean()},
            stats={"null_tokens": null_tokens, "frames": torch.tensor(context.layout.frames)},
        )


def _moe_dit(**kwargs) -> DiT:
    def factory(index, width, hidden):
        return _LabelMLP(width, hidden // 2, 4) if index % 2 else dense_mlp(width, hidden)

    return DiT(8, 2, 1, 16, 4, 2, num_classes=4, mlp_factory=factory, **kwargs)


def test_mlp_factory_builds_alternate_blocks_and_aux_outputs_are_gathered():
    torch.manual_seed(0)
    net = _perturb(_moe_dit(class_dropout=0.5))
    assert [type(b.mlp).__name__ for b in net.blocks] == ["Sequential", "_LabelMLP"] * 2
    assert net.blocks[1].mlp.dense[0].out_features == 32  # the factory got hidden = 4 * 16 and halved it
    x, t, y = torch.randn(6, 1, 8, 8, generator=_gen()), torch.rand(6, generator=_gen(1)), torch.arange(6) % 4
    out = net(x=x, t=t, y=y, generator=_gen(3), return_aux=True)
    assert isinstance(out, DiTOutput) and out.sample.shape == (6, 1, 8, 8)
    assert sorted(out.aux_losses) == ["blocks.1.l2", "blocks.3.l2"]
    assert sorted(out.stats) == ["blocks.1.frames", "blocks.1.null_tokens", "blocks.3.frames", "blocks.3.null_tokens"]
    dropped = int((drop_labels(y, 0.5, null_label=4, generator=_gen(3)) == 4).sum())
    assert int(out.stats["blocks.1.null_tokens"]) == int(out.stats["blocks.3.null_tokens"]) == dropped * 16
    torch.testing.assert_close(out.aux_loss, out.aux_losses["blocks.1.l2"] + out.aux_losses["blocks.3.l2"])
    plain = net(x=x, t=t, y=y, generator=_gen(3))
    assert isinstance(plain, torch.Tensor) and torch.equal(plain, out.sample)
    (out.sample.pow(2).mean() + out.aux_loss).backward()
    assert all(p.grad is not None for p in net.parameters())
    # no ContextMLP: no auxiliary outputs, a zero total
    dense = DiT(8, 2, 1, 16, 1, 2)(x=x, t=t, return_aux=True)
    assert dense.aux_losses == {} and dense.stats == {} and float(dense.aux_loss) == 0.0


def test_a_factory_must_build_modules():
    with pytest.raises(ValueError, match="mlp_factory"):
        DiT(8, 2, 1, 16, 2, 2, mlp_factory=lambda i, width, hidden: None)


# ----------------------------------------------------------------------------------------------- video DiT


def test_video_dit_shapes_layout_and_backward():
    torch.manual_seed(0)
    seen = []

    def recording(q, k, v, *, mask=None, layout=None):
        seen.append(layout)
        return _softmax_attention(q, k, v, mask=mask)

    net = VideoDiT(3, 8, 2, 1, 16, 2, 2, out_channels=2, num_classes=4, attention=recording)
    x, t, y = torch.randn(2, 3, 1, 8, 8, generator=_gen()), torch.rand(2, generator=_gen(1)), torch.tensor([1, 4])
    out = net(x=x, t=t, y=y)
    assert out.shape == (2, 3, 2, 8, 8) and bool((out == 0).all())
    assert seen == [TokenLayout(3, 4, 4)] * 2
    _perturb(net)
    net(x=x, t=t, y=y).pow(2).mean().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in net.parameters())
    with pytest.raises(ValueError, match="x:"):
        net(x=torch.randn(2, 4, 1, 8, 8), t=t)
    with pytest.raises(ValueError, match="frames"):
        VideoDiT(0, 8, 2, 1, 16, 2, 2)


def test_video_frames_get_different_positions_and_unpatchify_inverts_the_token_order():
    torch.manual_seed(0)
    seen = []

    def recording(q, k, v, *, mask=None, layout=None):
        seen.append(q)
        return _softmax_attention(q, k, v, mask=mask)

    net = VideoDiT(3, 8, 2, 1, 16, 1, 2, attention=recording)
    frame = torch.randn(1, 1, 1, 8, 8, generator=_gen())
    net(x=frame.expand(1, 3, 1, 8, 8), t=torch.rand(1))
    q = seen[0][0].transpose(0, 1).reshape(3, 16, 16)  # (frames, tokens per frame, heads * Dh)
    for a, b in ((0, 1), (1, 2), (0, 2)):
        assert (q[a] - q[b]).abs().max() > 1e-3  # equal frames, different temporal positions
    # the output reads the tokens back frame by frame: a per-token output layer puts token n's values in its patch
    with torch.no_grad():
        net.out.bias.copy_(torch.arange(4.0))  # the 2 x 2 pixels of every patch
    out = net(x=frame.expand(2, 3, 1, 8, 8), t=torch.rand(2))
    patch = torch.tensor([[0.0, 1.0], [2.0, 3.0]])
    torch.testing.assert_close(out, patch.repeat(4, 4).expand(2, 3, 1, 8, 8))


def test_frame_local_attention_keeps_frames_apart():
    def frame_local(q, k, v, *, mask=None, layout=None):
        f = layout.frame_index(device=q.device)
        return _softmax_attention(q, k, v, mask=f[:, None] == f[None, :])

    torch.manual_seed(0)
    local = _perturb(VideoDiT(2, 8, 2, 1, 16, 2, 2, attention=frame_local))
    dense = VideoDiT(2, 8, 2, 1, 16, 2, 2)
    dense.load_state_dict(local.state_dict())
    x, t = torch.randn(1, 2, 1, 8, 8, generator=_gen()), torch.rand(1, generator=_gen(1))
    x2 = x.clone()
    x2[:, 1] = torch.randn(1, 1, 8, 8, generator=_gen(2))  # change the second frame only
    torch.testing.assert_close(local(x=x2, t=t)[:, 0], local(x=x, t=t)[:, 0], rtol=0, atol=1e-6)
    assert (dense(x=x2, t=t)[:, 0] - dense(x=x, t=t)[:, 0]).abs().max() > 1e-4
    assert torch.equal(TokenLayout(2, 1, 3).frame_index(), torch.tensor([0, 0, 0, 1, 1, 1]))
    with pytest.raises(ValueError, match="frames"):
        TokenLayout(0, 2, 2)
