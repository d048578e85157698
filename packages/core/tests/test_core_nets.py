"""Tests for flowlab.core.nets: embeddings, MLPs, UNets, DiT, EGNN, graph builders and wrappers."""

from __future__ import annotations

import math
import re

import pytest
import torch
import torch.nn.functional as F
from scipy.spatial import cKDTree

from flowlab.core.manifolds.base import Manifold
from flowlab.core.nets import (
    MLP,
    ClassifierFreeGuidance,
    DiT,
    DiTBlock,
    ECMPreconditioner,
    EDMPreconditioner,
    EGNNLayer,
    FourierFeatures,
    ManifoldMLP,
    SinusoidalEmbedding,
    TimeMLP,
    UNet1d,
    UNet2d,
    knn_graph,
    radius,
    radius_graph,
    seeded_init,
    zero_init,
)
from flowlab.core.nets.dit import _unpatchify
from flowlab.core.nets.unet import _ResBlock

pytestmark = pytest.mark.usefixtures("one_thread")  # the core plugin's: tiny networks run fastest on one thread


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _perturb(module: torch.nn.Module, seed: int = 0, std: float = 0.3) -> None:
    """Fill every parameter with random values (undoes zero inits so outputs are non-trivial)."""
    g = _gen(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * std)


# ----------------------------------------------------------------------------------------------- embeddings


def test_sinusoidal_embedding_shape_range_and_shift_invariance():
    emb = SinusoidalEmbedding(16, scale=3.0)
    t = torch.rand(64, generator=_gen(), dtype=torch.float64)
    e = emb(t)
    assert e.shape == (64, 16) and e.dtype == torch.float64
    assert bool((e.abs() <= 1).all())
    # every (cos, sin) pair has unit norm, so |e(t)|^2 = dim/2 for all t
    torch.testing.assert_close(e.square().sum(-1), torch.full((64,), 8.0, dtype=torch.float64))
    # e(0) = (1, ..., 1, 0, ..., 0)
    torch.testing.assert_close(
        emb(torch.zeros(1, dtype=torch.float64))[0], torch.cat([torch.ones(8), torch.zeros(8)]).double()
    )
    # <e(a), e(b)> = sum_k cos(w_k (a - b)) depends only on a - b
    a, b, c = t[:32], t[32:], torch.rand(32, generator=_gen(1), dtype=torch.float64)
    torch.testing.assert_close((emb(a) * emb(b)).sum(-1), (emb(a + c) * emb(b + c)).sum(-1))
    # distinct times give distinct embeddings
    assert torch.cdist(e, e).add(torch.eye(64, dtype=torch.float64)).min() > 1e-6


def test_sinusoidal_embedding_rejects_bad_arguments():
    with pytest.raises(ValueError, match="dim"):
        SinusoidalEmbedding(7)
    with pytest.raises(ValueError, match="max_period"):
        SinusoidalEmbedding(8, max_period=1.0)
    with pytest.raises(ValueError, match="t:"):
        SinusoidalEmbedding(8)(torch.zeros(4, 1))


def test_fourier_features_fixed_buffer_and_unit_pairs():
    ff = FourierFeatures(32, 4.0, generator=_gen(3))
    assert "weight" in ff.state_dict() and not list(ff.parameters())
    torch.testing.assert_close(ff.weight, FourierFeatures(32, 4.0, generator=_gen(3)).weight)
    assert not torch.equal(ff.weight, FourierFeatures(32, 4.0, generator=_gen(4)).weight)
    t = torch.rand(10, generator=_gen())
    out = ff(t)
    assert out.shape == (10, 32)
    torch.testing.assert_close(out[:, :16].square() + out[:, 16:].square(), torch.ones(10, 16))
    # the empirical spread of W matches scale (2000 draws: relative s.e. ~ 1.6%)
    big = FourierFeatures(4000, 4.0, generator=_gen(5))
    assert abs(big.weight.std().item() / 4.0 - 1) < 0.08
    vec = FourierFeatures(8, 1.0, in_features=3, generator=_gen())
    assert vec(torch.randn(5, 3)).shape == (5, 8)
    with pytest.raises(ValueError, match="v:"):
        vec(torch.randn(5, 2))


# ---------------------------------------------------------------------------------------------------- MLPs


def test_mlp_shapes_zero_out_and_options():
    net = MLP(3, 5, hidden=(16, 16), layer_norm=True, zero_out=True)
    x = torch.randn(7, 3, generator=_gen())
    out = net(x)
    assert out.shape == (7, 5) and bool((out == 0).all())
    assert sum(isinstance(m, torch.nn.LayerNorm) for m in net.modules()) == 2
    out.sum().backward()
    assert net.out.weight.grad.abs().sum() > 0  # zero init still trains
    assert MLP(3, 5, hidden=(16,))(x).abs().sum() > 0
    with pytest.raises(ValueError, match="act"):
        MLP(3, 5, act="swishy")
    with pytest.raises(ValueError, match="hidden"):
        MLP(3, 5, hidden=(16, 0))
    with pytest.raises(ValueError, match="x:"):
        net(torch.randn(7, 4))


def test_zero_init_zeroes_every_parameter():
    layer = zero_init(torch.nn.Linear(4, 3))
    assert all(bool((p == 0).all()) for p in layer.parameters())


def test_time_mlp_one_and_two_times():
    torch.manual_seed(0)
    net = TimeMLP(3, hidden=(32, 32)).double()
    x = torch.randn(6, 3, generator=_gen(), dtype=torch.float64)
    t = torch.rand(6, generator=_gen(1), dtype=torch.float64)
    out = net(x=x, t=t)
    assert out.shape == (6, 3) and out.dtype == torch.float64
    assert (net(x=x, t=1 - t) - out).abs().max() > 1e-6  # depends on t
    # sample i depends only on (x_i, t_i): batch size does not matter
    torch.testing.assert_close(net(x=x[:2], t=t[:2]), out[:2])

    two = TimeMLP(3, times=2, cond_dim=2, hidden=(32,)).double()
    s = t / 2
    c = torch.randn(6, 2, generator=_gen(2), dtype=torch.float64)
    out2 = two(x=x, s=s, t=t, cond=c)
    assert out2.shape == (6, 3)
    assert (two(x=x, s=s / 2, t=t, cond=c) - out2).abs().max() > 1e-6  # depends on s
    assert (two(x=x, s=s, t=t, cond=-c) - out2).abs().max() > 1e-6  # depends on cond
    with pytest.raises(ValueError, match="s:"):
        two(x=x, t=t, cond=c)
    with pytest.raises(ValueError, match="s:"):
        net(x=x, t=t, s=s)
    with pytest.raises(ValueError, match="cond:"):
        two(x=x, s=s, t=t)
    with pytest.raises(ValueError, match="cond:"):
        two(x=x, s=s, t=t, cond=c[:, :1])
    with pytest.raises(ValueError, match="t:"):
        net(x=x, t=torch.tensor(0.5, dtype=torch.float64))
    with pytest.raises(ValueError, match="t:"):
        net(x=x, t=t[:5])
    with pytest.raises(ValueError, match="x:"):
        net(x=x[:, :2], t=t)
    with pytest.raises(ValueError, match="times"):
        TimeMLP(3, times=3)


class _TestTorus(Manifold):
    """Flat torus of angles with the (cos, sin) input hook ManifoldMLP looks for."""

    def __init__(self, d: int) -> None:
        self.dim = self.ambient_dim = d

    def input_features(self, x):
        return torch.cat([x.cos(), x.sin()], dim=-1)

    def expmap(self, x, u):
        return torch.remainder(x + u + math.pi, 2 * math.pi) - math.pi

    def logmap(self, x, y):
        return torch.remainder(y - x + math.pi, 2 * math.pi) - math.pi

    def projx(self, x):
        return self.expmap(x, torch.zeros_like(x))

    def proju(self, x, u):
        return u

    def inner(self, x, u, v):
        return (u * v).sum(-1)

    def belongs(self, x, atol=None):
        return ((x >= -math.pi) & (x < math.pi)).all(-1)

    def random_base(self, n, *, generator=None, device=None, dtype=None):
        return (torch.rand(n, self.dim, generator=generator, dtype=dtype) * 2 - 1) * math.pi

    def base_log_prob(self, x):
        return torch.full(x.shape[:1], -self.dim * math.log(2 * math.pi), dtype=x.dtype)


class _TestSphere(_TestTorus):
    """Unit sphere in R^(d+1) without an input hook (ambient coordinates are the features)."""

    input_features = None

    def __init__(self, d: int) -> None:
        self.dim, self.ambient_dim = d, d + 1

    def proju(self, x, u):
        return u - (x * u).sum(-1, keepdim=True) * x


def test_manifold_mlp_torus_features_are_periodic():
    net = ManifoldMLP(_TestTorus(2), hidden=(32, 32)).double()
    assert net.mlp.in_dim == 4 + 64  # (cos, sin) of two angles + time embedding
    x = _TestTorus(2).random_base(8, generator=_gen(), dtype=torch.float64)
    t = torch.rand(8, generator=_gen(1), dtype=torch.float64)
    shift = 2 * math.pi * torch.tensor([1.0, -3.0], dtype=torch.float64)
    torch.testing.assert_close(net(x=x, t=t), net(x=x + shift, t=t))
    two = ManifoldMLP(_TestTorus(2), times=2, hidden=(16,))
    assert two(x=x.float(), s=t.float() / 2, t=t.float()).shape == (8, 2)


def test_manifold_mlp_fourier_features_of_the_embedding():
    """Fourier features act on the manifold's embedding, so the torus net stays periodic; they are fixed buffers
    drawn at construction (part of the state dict, not trained) and bad widths are rejected."""
    net = ManifoldMLP(_TestTorus(2), hidden=(32,), fourier_dim=16, fourier_scale=3.0).double()
    assert net.mlp.in_dim == 4 + 16 + 64
    assert tuple(net.fourier.weight.shape) == (4, 8) and "fourier.weight" in net.state_dict()
    assert all(p is not net.fourier.weight for p in net.parameters())
    x = _TestTorus(2).random_base(8, generator=_gen(), dtype=torch.float64)
    t = torch.rand(8, generator=_gen(1), dtype=torch.float64)
    shift = 2 * math.pi * torch.tensor([-2.0, 1.0], dtype=torch.float64)
    torch.testing.assert_close(net(x=x, t=t), net(x=x + shift, t=t))
    plain = ManifoldMLP(_TestTorus(2), hidden=(32,)).double()
    feats = net._features(x)
    torch.testing.assert_close(feats[:, :4], plain._features(x))  # the embedding itself, then its features
    assert feats.shape == (8, 20)
    with pytest.raises(ValueError, match="fourier_dim"):
        ManifoldMLP(_TestTorus(2), fourier_dim=-2)
    with pytest.raises(ValueError, match="dim"):
        ManifoldMLP(_TestTorus(2), fourier_dim=3)


def test_manifold_mlp_projects_to_tangent_space():
    net = ManifoldMLP(_TestSphere(2), hidden=(32,)).double()
    assert net.mlp.in_dim == 3 + 64
    x = F.normalize(torch.randn(16, 3, generator=_gen(), dtype=torch.float64), dim=-1)
    v = net(x=x, t=torch.rand(16, generator=_gen(1), dtype=torch.float64))
    assert v.abs().max() > 1e-4
    torch.testing.assert_close((x * v).sum(-1), torch.zeros(16, dtype=torch.float64), atol=1e-12, rtol=0)
    with pytest.raises(ValueError, match="manifold"):
        ManifoldMLP("sphere")


# --------------------------------------------------------------------------------------------------- UNets


@pytest.mark.parametrize("cls, spatial", [(UNet1d, (16,)), (UNet2d, (8, 8))])
def test_unet_shapes_and_zero_output_at_init(cls, spatial):
    net = cls(2, 3, channels=(8, 16, 16), time_dim=16, num_res_blocks=2)
    x = torch.randn(4, 2, *spatial, generator=_gen())
    t = torch.rand(4, generator=_gen(1))
    out = net(x=x, t=t)
    assert out.shape == (4, 3, *spatial) and bool((out == 0).all())
    out.square().sum().backward()
    loss = (net(x=x, t=t) - 1).square().sum()
    loss.backward()
    assert net.conv_out.weight.grad.abs().sum() > 0

    live = cls(2, channels=(8, 16), time_dim=16, cond_dim=5, zero_out=False)
    c = torch.randn(4, 5, generator=_gen(2))
    y = live(x=x, t=t, cond=c)
    assert y.shape == x.shape and y.abs().max() > 0
    assert (live(x=x, t=1 - t, cond=c) - y).abs().max() > 1e-6  # FiLM time conditioning is wired
    assert (live(x=x, t=t, cond=-c) - y).abs().max() > 1e-6
    torch.testing.assert_close(live(x=x[:1], t=t[:1], cond=c[:1]), y[:1], atol=1e-5, rtol=1e-4)


def test_unet_rejects_bad_inputs():
    net = UNet2d(1, channels=(8, 16), time_dim=16)
    with pytest.raises(ValueError, match="x:"):
        net(x=torch.randn(2, 1, 7, 8), t=torch.rand(2))  # not divisible by 2
    with pytest.raises(ValueError, match="x:"):
        net(x=torch.randn(2, 2, 8, 8), t=torch.rand(2))
    with pytest.raises(ValueError, match="t:"):
        net(x=torch.randn(2, 1, 8, 8), t=torch.rand(3))
    with pytest.raises(ValueError, match=r"cond: expected None .*cond_dim=0.*got shape \(2, 3\)"):
        net(x=torch.randn(2, 1, 8, 8), t=torch.rand(2), cond=torch.randn(2, 3))
    with pytest.raises(ValueError, match="channels"):
        UNet1d(1, channels=())
    with pytest.raises(ValueError, match="dropout"):
        UNet1d(1, dropout=1.0)
    with pytest.raises(ValueError, match="cond_mode"):
        UNet2d(1, cond_dim=3, cond_mode="concat")
    with pytest.raises(ValueError, match=r"cond_mode.*cond_dim > 0"):
        UNet2d(1, cond_mode="add")
    x, t = torch.randn(2, 1, 8, 8), torch.rand(2)
    for mode in ("shared", "add", "film"):
        conditioned = UNet2d(1, channels=(8, 16), time_dim=16, cond_dim=3, cond_mode=mode)
        with pytest.raises(ValueError, match=r"cond: expected shape \(2, 3\), got None"):
            conditioned(x=x, t=t)
        for bad in (torch.randn(2, 4), torch.randn(3, 3), torch.randn(2, 3, 1), torch.randn(6)):
            got = re.escape(str(tuple(bad.shape)))
            with pytest.raises(ValueError, match=rf"cond: expected shape \(2, 3\), got shape {got}"):
                conditioned(x=x, t=t, cond=bad)


def _perturb_cond_projections(net: torch.nn.Module, seed: int) -> None:
    g = _gen(seed)
    with torch.no_grad():
        for blk in net.modules():
            if isinstance(blk, _ResBlock):
                for p in blk.cond_proj.parameters():
                    p.copy_(0.3 * torch.randn(p.shape, generator=g))


@pytest.mark.parametrize("mode", ["add", "film"])
@pytest.mark.parametrize("cls, spatial", [(UNet1d, (16,)), (UNet2d, (8, 8))])
def test_unet_per_block_condition(cls, spatial, mode):
    kwargs = dict(channels=(8, 16, 16), time_dim=16, num_res_blocks=2, zero_out=False)
    torch.manual_seed(0)
    plain = cls(2, **kwargs)
    torch.manual_seed(0)
    net = cls(2, cond_dim=5, cond_mode=mode, **kwargs)

    # One projection per residual block (levels * num_res_blocks down and up, two in the middle), and only those
    # (plus the condition embedding) are new: every other parameter is the same seed's unconditioned one.
    blocks = [m for m in net.modules() if isinstance(m, _ResBlock)]
    projections = [name for name, m in net.named_modules() if name.endswith("cond_proj")]
    assert len(blocks) == len(projections) == 2 * 3 * 2 + 2
    assert all(isinstance(blk.cond_proj, torch.nn.Linear) for blk in blocks)
    assert [blk.cond_proj.out_features for blk in blocks] == [
        (2 if mode == "film" else 1) * blk.film.out_features // 2 for blk in blocks
    ]
    plain_state, state = plain.state_dict(), net.state_dict()
    assert set(plain_state) < set(state)
    assert all(".cond_proj." in k or k.startswith("cond_embed.") for k in set(state) - set(plain_state))
    assert all(torch.equal(plain_state[k], state[k]) for k in plain_state)

    # Zero-initialised projections: a fresh conditioned network ignores cond and equals the unconditioned one.
    x = torch.randn(4, 2, *spatial, generator=_gen())
    t = torch.rand(4, generator=_gen(1))
    c = torch.randn(4, 5, generator=_gen(2))
    reference = plain(x=x, t=t)
    assert reference.abs().max() > 0
    torch.testing.assert_close(net(x=x, t=t, cond=c), reference, atol=0, rtol=0)
    torch.testing.assert_close(net(x=x, t=t, cond=3 * c), reference, atol=0, rtol=0)

    # Gradients reach every projection, already at init (so training moves them off zero) ...
    net(x=x, t=t, cond=c).square().sum().backward()
    assert all(blk.cond_proj.weight.grad.abs().sum() > 0 for blk in blocks)
    # ... and once they are non-zero the output depends on cond, batched sample by sample.
    _perturb_cond_projections(net, 3)
    net.zero_grad()
    y = net(x=x, t=t, cond=c)
    assert (y - reference).abs().max() > 1e-4
    assert (net(x=x, t=t, cond=-c) - y).abs().max() > 1e-4
    other = c.clone()
    other[1:] = torch.randn(3, 5, generator=_gen(4))
    torch.testing.assert_close(net(x=x, t=t, cond=other)[0], y[0], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(net(x=x[:1], t=t[:1], cond=c[:1]), y[:1], atol=1e-5, rtol=1e-4)
    y.square().sum().backward()
    assert all(blk.cond_proj.weight.grad.abs().sum() > 0 for blk in blocks)
    assert all(blk.cond_proj.bias.grad.abs().sum() > 0 for blk in blocks)
    assert all(p.grad.abs().sum() > 0 for p in net.cond_embed.parameters())


def test_unet_without_per_block_condition_keeps_its_parameters():
    """cond_dim=0 and the default "shared" mode build no per-block projection and keep today's state_dict keys."""
    for kwargs in ({}, {"cond_dim": 4}, {"cond_dim": 4, "cond_mode": "shared"}):
        torch.manual_seed(0)
        net = UNet2d(1, channels=(8, 16), time_dim=16, **kwargs)
        keys = set(net.state_dict())
        assert not any("cond_proj" in k for k in keys)
        assert (("cond_embed.weight" in keys) and ("cond_embed.bias" in keys)) == bool(kwargs)
        assert not any(k.startswith("cond_embed.") and k not in ("cond_embed.weight", "cond_embed.bias") for k in keys)
    torch.manual_seed(0)
    default = UNet2d(1, channels=(8, 16), time_dim=16, cond_dim=4)
    torch.manual_seed(0)
    shared = UNet2d(1, channels=(8, 16), time_dim=16, cond_dim=4, cond_mode="shared")
    pairs = zip(default.state_dict().items(), shared.state_dict().items(), strict=True)
    assert all(ka == kb and torch.equal(a, b) for (ka, a), (kb, b) in pairs)


# ------------------------------------------------------------------------------------------------------ DiT


def test_dit_block_is_identity_at_init_and_respects_masks():
    block = DiTBlock(16, 4)
    x = torch.randn(3, 5, 16, generator=_gen())
    c = torch.randn(3, 16, generator=_gen(1))
    assert torch.equal(block(x, c), x)
    _perturb(block)
    y = block(x, c)
    assert (y - x).abs().max() > 1e-3
    # a key-padding mask makes the unmasked tokens blind to the masked ones
    mask = torch.tensor([True, True, True, False, False])[None, None, None, :]
    x2 = x.clone()
    x2[:, 3:] = torch.randn(3, 2, 16, generator=_gen(2))
    torch.testing.assert_close(block(x, c, attn_mask=mask)[:, :3], block(x2, c, attn_mask=mask)[:, :3])
    # a custom MLP (e.g. a mixture of experts) is used in place of the default
    custom = DiTBlock(16, 4, mlp=torch.nn.Linear(16, 16))
    assert custom.mlp.__class__ is torch.nn.Linear
    with pytest.raises(ValueError, match="heads"):
        DiTBlock(16, 5)
    with pytest.raises(ValueError, match="c:"):
        block(x, c[:, :8])


def test_unpatchify_inverts_patch_extraction():
    x = torch.randn(2, 3, 8, 8, generator=_gen())
    p = 2
    cols = F.unfold(x, kernel_size=p, stride=p)  # (B, C*p*p, L), channel-major, patches row-major
    tokens = cols.reshape(2, 3, p, p, 16).permute(0, 4, 2, 3, 1).reshape(2, 16, p * p * 3)
    torch.testing.assert_close(_unpatchify(tokens, p, 3), x)


def test_dit_shapes_zero_output_and_conditioning():
    net = DiT(8, 2, 3, 32, 2, 4, out_channels=2, cond_dim=4)
    x = torch.randn(2, 3, 8, 8, generator=_gen())
    t = torch.rand(2, generator=_gen(1))
    c = torch.randn(2, 4, generator=_gen(2))
    out = net(x=x, t=t, cond=c)
    assert out.shape == (2, 2, 8, 8) and bool((out == 0).all())
    _perturb(net, std=0.1)
    y = net(x=x, t=t, cond=c)
    assert y.abs().max() > 1e-3
    assert (net(x=x, t=1 - t, cond=c) - y).abs().max() > 1e-5
    with pytest.raises(ValueError, match="x:"):
        net(x=torch.randn(2, 3, 6, 6), t=t, cond=c)
    with pytest.raises(ValueError, match="patch"):
        DiT(8, 3, 1, 32, 1, 4)


# ----------------------------------------------------------------------------------------------------- EGNN


def _egnn(edge_dim: int = 0, **kwargs) -> EGNNLayer:
    torch.manual_seed(0)
    layer = EGNNLayer(6, edge_dim, hidden=16, **kwargs).double()
    with torch.no_grad():  # undo the tiny coordinate init so coordinate updates are sizeable
        layer.phi_x[-1].weight.normal_(0, 0.5)
    return layer


def _random_orthogonal(n: int, seed: int) -> torch.Tensor:
    q, r = torch.linalg.qr(torch.randn(n, n, generator=_gen(seed), dtype=torch.float64))
    return q * torch.sign(torch.diagonal(r))


@pytest.mark.parametrize("normalize", [False, True])
def test_egnn_is_e_n_equivariant(normalize):
    g = _gen(10)
    n = 12
    h = torch.randn(n, 6, generator=g, dtype=torch.float64)
    x = torch.randn(n, 3, generator=g, dtype=torch.float64)
    edge_index = radius_graph(x, 1.8)
    e = torch.randn(edge_index.shape[1], 2, generator=g, dtype=torch.float64)
    layer = _egnn(2, normalize=normalize)
    out = layer(h, x, edge_index, e)
    assert (out.x - x).abs().max() > 1e-3  # coordinates actually move
    for seed in range(3):
        q = _random_orthogonal(3, seed)  # includes reflections (det -1) for some seeds
        b = torch.randn(3, generator=_gen(100 + seed), dtype=torch.float64)
        x_rot = x @ q.T + b
        moved = layer(h, x_rot, radius_graph(x_rot, 1.8), e)
        torch.testing.assert_close(moved.h, out.h, atol=1e-10, rtol=0)
        torch.testing.assert_close(moved.x, out.x @ q.T + b, atol=1e-10, rtol=0)


def test_egnn_is_permutation_equivariant():
    g = _gen(11)
    n = 10
    h = torch.randn(n, 6, generator=g, dtype=torch.float64)
    x = torch.randn(n, 2, generator=g, dtype=torch.float64)
    edge_index = knn_graph(x, 3)
    layer = _egnn()
    out = layer(h, x, edge_index)
    perm = torch.randperm(n, generator=g)
    inverse = torch.argsort(perm)  # node perm[k] becomes node k
    moved = layer(h[perm], x[perm], inverse[edge_index])
    torch.testing.assert_close(moved.h, out.h[perm], atol=1e-12, rtol=0)
    torch.testing.assert_close(moved.x, out.x[perm], atol=1e-12, rtol=0)


def test_egnn_mean_aggregation_divides_by_n_minus_one_when_fully_connected():
    n = 5
    g = _gen(12)
    h = torch.randn(n, 6, generator=g, dtype=torch.float64)
    x = torch.randn(n, 3, generator=g, dtype=torch.float64)
    full = radius_graph(x, 1e6)
    assert full.shape[1] == n * (n - 1)
    mean, total = _egnn(coord_agg="mean"), _egnn(coord_agg="sum")
    torch.testing.assert_close(mean(h, x, full).x - x, (total(h, x, full).x - x) / (n - 1))


def test_egnn_messages_flow_from_source_to_target():
    h = torch.randn(2, 6, generator=_gen(), dtype=torch.float64)
    x = torch.tensor([[0.0, 0.0], [1.0, 2.0]], dtype=torch.float64)
    out = _egnn()(h, x, torch.tensor([[0], [1]]))  # one edge 0 -> 1
    torch.testing.assert_close(out.x[0], x[0])  # node 0 receives nothing
    step = out.x[1] - x[1]
    assert step.abs().max() > 1e-6
    assert abs(step[0] * 2.0 - step[1] * 1.0) < 1e-12  # parallel to x_1 - x_0


def test_egnn_rejects_bad_inputs():
    layer = EGNNLayer(4, 2)
    h, x = torch.randn(3, 4), torch.randn(3, 3)
    ei = torch.tensor([[0, 1], [1, 2]])
    with pytest.raises(ValueError, match="edge_attr"):
        layer(h, x, ei)
    with pytest.raises(ValueError, match="edge_index"):
        layer(h, x, ei.int(), torch.randn(2, 2))
    with pytest.raises(ValueError, match="edge_index"):
        layer(h, x, ei[:1], torch.randn(2, 2))
    with pytest.raises(ValueError, match="x:"):
        layer(h, x[:2], ei, torch.randn(2, 2))
    with pytest.raises(ValueError, match="h:"):
        layer(h[:, :3], x, ei, torch.randn(2, 2))
    with pytest.raises(ValueError, match="coord_agg"):
        EGNNLayer(4, coord_agg="max")


# ---------------------------------------------------------------------------------------------------- graphs


def _points(n: int = 60, d: int = 3, graphs: int = 4, seed: int = 0):
    g = _gen(seed)
    pos = torch.rand(n, d, generator=g, dtype=torch.float64)
    batch = torch.randint(0, graphs, (n,), generator=g)  # deliberately unsorted
    return pos, batch


def _edges(edge_index: torch.Tensor) -> set[tuple[int, int]]:
    return set(map(tuple, edge_index.T.tolist()))


def _radius_reference(pos, batch, r, loop):
    edges = set()
    for graph in batch.unique().tolist():
        idx = torch.nonzero(batch == graph).flatten().numpy()
        tree = cKDTree(pos[idx].numpy())
        for a, neighbours in enumerate(tree.query_ball_point(pos[idx].numpy(), r)):
            edges |= {(int(idx[b]), int(idx[a])) for b in neighbours if loop or b != a}  # (source, target)
    return edges


@pytest.mark.parametrize("loop", [False, True])
def test_radius_graph_matches_kd_tree_with_batches(loop):
    pos, batch = _points()
    expected = _radius_reference(pos, batch, 0.35, loop)
    edge_index = radius_graph(pos, 0.35, batch=batch, loop=loop)
    assert edge_index.dtype == torch.long and edge_index.shape[0] == 2
    assert _edges(edge_index) == expected and edge_index.shape[1] == len(expected)
    assert bool((batch[edge_index[0]] == batch[edge_index[1]]).all())
    # tiny blocks exercise the chunked path and give the same (sorted) edge list
    torch.testing.assert_close(radius_graph(pos, 0.35, batch=batch, loop=loop, block_pairs=7), edge_index)
    key = edge_index[1] * len(pos) + edge_index[0]
    assert bool((key[1:] > key[:-1]).all())  # sorted by target, then source, no duplicates


def test_radius_graph_max_num_neighbors_keeps_nearest():
    pos, batch = _points(seed=1)
    r, cap = 0.5, 3
    capped = radius_graph(pos, r, batch=batch, max_num_neighbors=cap, block_pairs=50)
    full = radius_graph(pos, r, batch=batch)
    dist = (pos[:, None] - pos[None]).norm(dim=-1)
    expected = set()
    for i in range(len(pos)):
        sources = full[0, full[1] == i]
        nearest = sources[torch.argsort(dist[i, sources])[:cap]]
        expected |= {(int(j), i) for j in nearest}
    assert _edges(capped) == expected
    assert int(torch.bincount(capped[1], minlength=len(pos)).max()) == cap


@pytest.mark.parametrize("loop", [False, True])
def test_knn_graph_matches_brute_force(loop):
    pos, batch = _points(seed=2, graphs=5)
    k = 4
    edge_index = knn_graph(pos, k, batch=batch, loop=loop, block_pairs=64)
    dist = (pos[:, None] - pos[None]).norm(dim=-1)
    expected = set()
    for i in range(len(pos)):
        candidates = torch.nonzero((batch == batch[i]) & (loop | (torch.arange(len(pos)) != i))).flatten()
        nearest = candidates[torch.argsort(dist[i, candidates])[:k]]
        expected |= {(int(j), i) for j in nearest}
    assert _edges(edge_index) == expected
    torch.testing.assert_close(knn_graph(pos, k, batch=batch, loop=loop), edge_index)


def test_graph_builders_follow_pyg_source_to_target_layout():
    pos = torch.tensor([[0.0], [1.0], [3.0], [10.0]])
    batch = torch.tensor([0, 0, 0, 1])
    edge_index = knn_graph(pos, 1, batch=batch)
    # the nearest neighbour of node 2 (at 3.0) is node 1: edge 1 -> 2 has target 2 in row 1
    assert edge_index[0, edge_index[1] == 2].tolist() == [1]
    assert edge_index[0, edge_index[1] == 0].tolist() == [1]
    assert (edge_index[1] == 3).sum() == 0  # a graph of one node has no neighbours without loops
    # message passing that sums x_j into target i = edge_index[1]
    pos_line = torch.tensor([[0.0], [1.0], [3.0]])
    ei = radius_graph(pos_line, 1.5)
    summed = torch.zeros(3).index_add_(0, ei[1], pos_line[ei[0], 0])
    torch.testing.assert_close(summed, torch.tensor([1.0, 0.0, 0.0]))


def test_graph_builders_edge_cases_and_bad_inputs():
    assert radius_graph(torch.zeros(0, 3), 1.0).shape == (2, 0)
    far = torch.tensor([[0.0, 0.0], [5.0, 5.0]])
    assert radius_graph(far, 1.0).shape == (2, 0)
    assert _edges(radius_graph(far, 1.0, loop=True)) == {(0, 0), (1, 1)}
    with pytest.raises(ValueError, match="r:"):
        radius_graph(far, 0.0)
    with pytest.raises(ValueError, match="k:"):
        knn_graph(far, 0)
    with pytest.raises(ValueError, match="pos:"):
        knn_graph(torch.zeros(4), 1)
    with pytest.raises(ValueError, match="pos:"):
        radius_graph(torch.tensor([[0.0, float("nan")]]), 1.0)
    with pytest.raises(ValueError, match="batch:"):
        knn_graph(far, 1, batch=torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match="batch:"):
        knn_graph(far, 1, batch=torch.zeros(2))
    with pytest.raises(ValueError, match="max_num_neighbors"):
        radius_graph(far, 1.0, max_num_neighbors=0)


def _grid_test_points(
    d: int, dtype: torch.dtype, seed: int = 0, lattice: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """Uniform points, a tight cluster and (with `lattice`) points at integer multiples of 0.5 (cell
    boundaries for r = 0.5, with pairs at exactly r), shuffled; and unsorted graph ids (negative ones too)."""
    g = _gen(seed)
    parts = [torch.rand(70, d, generator=g, dtype=torch.float64) * 3]
    parts.append(1.5 + 0.05 * torch.randn(40, d, generator=g, dtype=torch.float64))
    if lattice:
        parts.append(0.5 * torch.randint(0, 5, (40, d), generator=g).double())
    pos = torch.cat(parts)
    pos = pos[torch.randperm(len(pos), generator=g)].to(dtype)
    return pos, torch.randint(-2, 3, (len(pos),), generator=g)


def _by_target_and_distance(edge_index: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """(target, distance) of every edge, sorted: equal for edge lists that differ only among equal distances."""
    dist = (pos[edge_index[0]] - pos[edge_index[1]]).norm(dim=-1).double()
    order = torch.argsort(dist, stable=True)
    order = order[torch.argsort(edge_index[1, order], stable=True)]
    return torch.stack([edge_index[1, order].double(), dist[order]])


@pytest.mark.parametrize("cap", [None, 3])
@pytest.mark.parametrize("loop", [False, True])
@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize("d", [1, 2, 3])
def test_radius_graph_grid_matches_dense(d, batched, loop, cap):
    dtype = torch.float32 if d == 2 else torch.float64
    pos, batch = _grid_test_points(d, dtype, seed=d)
    kwargs = dict(batch=batch if batched else None, loop=loop, max_num_neighbors=cap)
    dense = radius_graph(pos, 0.5, method="dense", **kwargs)
    grid = radius_graph(pos, 0.5, method="grid", block_pairs=64, **kwargs)  # many small chunks
    assert dense.shape[1] > 0
    if cap is None:
        assert torch.equal(grid, dense)
        return
    # ties at the cap (lattice points) may go to different sources, at the same distances
    assert torch.equal(_by_target_and_distance(grid, pos), _by_target_and_distance(dense, pos))
    pos, batch = _grid_test_points(d, dtype, seed=d, lattice=False)  # no exact ties among random points
    kwargs["batch"] = batch if batched else None
    assert torch.equal(
        radius_graph(pos, 0.5, method="grid", **kwargs), radius_graph(pos, 0.5, method="dense", **kwargs)
    )


def test_radius_graph_grid_edge_cases_and_overflow_guard():
    for method in ("grid", "auto"):
        assert radius_graph(torch.zeros(0, 2), 1.0, method=method).shape == (2, 0)
    one = torch.tensor([[0.3, -2.0]])
    assert radius_graph(one, 1.0, method="grid").shape == (2, 0)
    assert radius_graph(one, 1.0, method="grid", loop=True).tolist() == [[0], [0]]
    # a sparse but huge 1-D grid still fits int64 keys
    line = torch.tensor([[0.0], [0.7], [1e15], [1e15 + 0.9], [-3e14]], dtype=torch.float64)
    assert torch.equal(radius_graph(line, 1.0, method="grid"), radius_graph(line, 1.0, method="dense"))
    # 3-D points spread over 1e7 cells per dimension overflow int64 keys: grid refuses, auto falls back
    g = _gen(5)
    spread = torch.rand(1100, 3, generator=g, dtype=torch.float64) * 1e7
    spread[1:50] = spread[0] + 0.2 * torch.rand(49, 3, generator=g, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"method: 'grid' .* int64"):
        radius_graph(spread, 1.0, method="grid")
    dense = radius_graph(spread, 1.0, method="dense")
    assert dense.shape[1] > 0 and torch.equal(radius_graph(spread, 1.0), dense)
    # above the auto threshold, on points that fit, auto takes the grid and agrees with dense
    square = torch.rand(1100, 2, generator=g) * 30
    assert torch.equal(radius_graph(square, 1.0), radius_graph(square, 1.0, method="dense"))


def test_radius_graph_bad_method():
    pos = torch.rand(5, 2, generator=_gen(6))
    with pytest.raises(ValueError, match="method: unknown value 'kdtree'"):
        radius_graph(pos, 1.0, method="kdtree")
    with pytest.raises(ValueError, match="method: 'grid' needs points of dimension 1 to 3"):
        radius_graph(torch.rand(5, 4, generator=_gen(6)), 1.0, method="grid")


# -------------------------------------------------------------------------------------------------- wrappers


class _Recorder(torch.nn.Module):
    """A raw network that remembers its inputs and returns a fixed non-trivial function of them."""

    def forward(self, *, x, t, **cond):
        self.seen = (x, t, cond)
        return torch.tanh(x) + t[:, None]


def test_edm_coefficients_give_unit_variance_input_and_target():
    sd = 0.5
    pre = EDMPreconditioner(_Recorder(), sigma_data=sd)
    sigma = torch.tensor([0.002, 0.1, 0.5, 2.0, 80.0], dtype=torch.float64)
    c = pre.coefficients(sigma)
    # EDM appendix B.6: Var[c_in (y + n)] = 1 and Var[(y - c_skip (y + n)) / c_out] = 1 for Var y = sd^2
    one = torch.ones(5, dtype=torch.float64)
    torch.testing.assert_close(c.c_in.square() * (sigma.square() + sd**2), one)
    target_var = ((1 - c.c_skip).square() * sd**2 + c.c_skip.square() * sigma.square()) / c.c_out.square()
    torch.testing.assert_close(target_var, one)
    # c_skip minimises that target variance (so c_out is as small as possible)
    grid = torch.linspace(0, 1, 100_001, dtype=torch.float64)[:, None]
    best = grid[torch.argmin((1 - grid).square() * sd**2 + grid.square() * sigma.square(), dim=0), 0]
    torch.testing.assert_close(best, c.c_skip, atol=2e-5, rtol=0)
    torch.testing.assert_close(c.c_noise, sigma.log() / 4)
    # Monte Carlo with Gaussian data of std sd (200k draws: s.e. of a unit variance ~ 0.003)
    g = _gen(7)
    y = torch.randn(200_000, generator=g, dtype=torch.float64) * sd
    for s in (0.1, 1.0, 10.0):
        ci = pre.coefficients(torch.tensor([s], dtype=torch.float64))
        x = y + s * torch.randn(200_000, generator=g, dtype=torch.float64)
        assert abs((ci.c_in * x).var().item() - 1) < 0.02
        assert abs(((y - ci.c_skip * x) / ci.c_out).var().item() - 1) < 0.02


def test_edm_denoiser_composes_the_raw_network():
    rec = _Recorder()
    pre = EDMPreconditioner(rec, sigma_data=0.5)
    x = torch.randn(4, 3, generator=_gen(), dtype=torch.float64)
    sigma = torch.tensor([0.01, 0.3, 1.0, 30.0], dtype=torch.float64)
    label = torch.arange(4)
    d = pre(x=x, sigma=sigma, label=label)
    c = pre.coefficients(sigma)
    torch.testing.assert_close(rec.seen[0], c.c_in[:, None] * x)
    torch.testing.assert_close(rec.seen[1], c.c_noise)
    assert rec.seen[2]["label"] is label
    torch.testing.assert_close(
        d, c.c_skip[:, None] * x + c.c_out[:, None] * (torch.tanh(rec.seen[0]) + c.c_noise[:, None])
    )
    # as sigma -> 0 the denoiser returns its input
    tiny = torch.full((4,), 1e-8, dtype=torch.float64)
    torch.testing.assert_close(pre(x=x, sigma=tiny), x, atol=1e-7, rtol=0)
    with pytest.raises(ValueError, match="sigma"):
        pre(x=x, sigma=sigma[:3])
    with pytest.raises(ValueError, match="sigma_data"):
        EDMPreconditioner(rec, sigma_data=0.0)


def test_ecm_preconditioner_boundary_and_modes():
    sigma_min = 0.002
    pre = ECMPreconditioner(_Recorder(), sigma_data=0.5, sigma_min=sigma_min)
    x = torch.randn(3, 2, generator=_gen(), dtype=torch.float64)
    at_min = torch.full((3,), sigma_min, dtype=torch.float64)
    pre.eval()
    assert torch.equal(pre(x=x, sigma=at_min), x)  # f(x, sigma_min) = x exactly in evaluation mode
    pre.train()
    assert (pre(x=x, sigma=at_min) - x).abs().max() > 0
    sigma = torch.tensor([0.01, 1.0, 50.0], dtype=torch.float64)
    edm = EDMPreconditioner(_Recorder(), sigma_data=0.5).coefficients(sigma)
    train = pre.coefficients(sigma)
    for name in ("c_skip", "c_out", "c_in", "c_noise"):
        torch.testing.assert_close(getattr(train, name), getattr(edm, name))
    # evaluation mode approaches training mode as sigma_min -> 0
    gaps = []
    for s_min in (1e-2, 1e-4, 1e-6):
        near = ECMPreconditioner(_Recorder(), sigma_data=0.5, sigma_min=s_min).eval()
        gaps.append((near(x=x, sigma=sigma) - pre(x=x, sigma=sigma)).abs().max().item())
    assert gaps[0] > gaps[1] > gaps[2] and gaps[2] < 1e-5


class _CondField(torch.nn.Module):
    """u(x, t, cond) = x * cond_scale + t, counting calls."""

    calls = 0

    def forward(self, *, x, t, cond, s=None):
        self.calls += 1
        self.batch = x.shape[0]
        out = x * cond + t[:, None]
        return out if s is None else out + s[:, None]


def test_classifier_free_guidance_limits_and_single_batched_call():
    field = _CondField()
    x = torch.randn(5, 3, generator=_gen())
    t = torch.rand(5, generator=_gen(1))
    cond = torch.randn(5, 3, generator=_gen(2))
    null = torch.zeros(3)
    conditional, unconditional = field(x=x, t=t, cond=cond), field(x=x, t=t, cond=null.expand(5, 3))
    field.calls = 0
    for scale, expected in ((1.0, conditional), (0.0, unconditional)):
        cfg = ClassifierFreeGuidance(field, scale=scale, null_cond={"cond": null})
        torch.testing.assert_close(cfg(x=x, t=t, cond=cond), expected)
    assert field.calls == 2 and field.batch == 10  # one call per guided evaluation, batch 2B
    cfg = ClassifierFreeGuidance(field, scale=3.0, null_cond={"cond": null.expand(5, 3)})
    torch.testing.assert_close(cfg(x=x, t=t, cond=cond), unconditional + 3 * (conditional - unconditional))
    s = t / 2
    torch.testing.assert_close(cfg(x=x, t=t, cond=cond, s=s)[:, 0], (3 * conditional - 2 * unconditional)[:, 0] + s)


def test_classifier_free_guidance_rejects_bad_inputs():
    field = _CondField()
    x, t = torch.randn(2, 3), torch.rand(2)
    with pytest.raises(ValueError, match="null_cond"):
        ClassifierFreeGuidance(field, scale=2.0, null_cond={})
    with pytest.raises(ValueError, match="scale"):
        ClassifierFreeGuidance(field, scale=float("nan"), null_cond={"cond": torch.zeros(3)})
    cfg = ClassifierFreeGuidance(field, scale=2.0, null_cond={"cond": torch.zeros(4)})
    with pytest.raises(ValueError, match="null_cond"):
        cfg(x=x, t=t, cond=torch.randn(2, 3))
    with pytest.raises(ValueError, match="cond"):
        cfg(x=x, t=t)


# ---------------------------------------------------------------------------------------------------- devices


def test_nets_follow_the_input_device(device):
    g = _gen(20)
    x = torch.randn(6, 3, generator=g).to(device)
    t = torch.rand(6, generator=g).to(device)
    assert TimeMLP(3, hidden=(8,)).to(device)(x=x, t=t).device == x.device
    seq = torch.randn(2, 1, 8, generator=g).to(device)
    assert UNet1d(1, channels=(8, 8), time_dim=8).to(device)(x=seq, t=t[:2]).device == x.device
    img = torch.randn(2, 1, 4, 4, generator=g).to(device)
    film = UNet2d(1, channels=(8, 8), time_dim=8, cond_dim=3, cond_mode="film").to(device)
    assert film(x=img, t=t[:2], cond=torch.randn(2, 3, generator=g).to(device)).device == x.device
    assert DiT(4, 2, 1, 16, 1, 2).to(device)(x=img, t=t[:2]).device == x.device
    batch = torch.tensor([0, 0, 0, 1, 1, 1], device=device)
    for edge_index, reference in (
        (radius_graph(x, 1.5, batch=batch), radius_graph(x.cpu(), 1.5, batch=batch.cpu())),
        (knn_graph(x, 2, batch=batch), knn_graph(x.cpu(), 2, batch=batch.cpu())),
    ):
        assert edge_index.device == x.device
        assert _edges(edge_index.cpu()) == _edges(reference)
    out = EGNNLayer(4).to(device)(torch.randn(6, 4, device=device), x, knn_graph(x, 2, batch=batch))
    assert out.x.device == x.device and out.h.device == x.device
    pre = EDMPreconditioner(TimeMLP(3, hidden=(8,)).to(device))
    assert pre(x=x, sigma=t + 0.1).device == x.device
    cfg = ClassifierFreeGuidance(_CondField(), scale=2.0, null_cond={"cond": torch.zeros(3)})
    assert cfg(x=x, t=t, cond=x).device == x.device


def test_seeded_init_ignores_earlier_draws_and_restores_the_global_rng():
    def build(seed):
        with seeded_init(seed):
            return MLP(3, 2, (8,))

    torch.manual_seed(0)
    first = build(7)
    after = torch.rand(3)  # the global stream goes on as if nothing had been built
    torch.manual_seed(0)
    assert torch.equal(torch.rand(3), after)
    torch.rand(100)  # other draws before the second build
    second = build(7)
    for p, q in zip(first.parameters(), second.parameters(), strict=True):
        assert torch.equal(p, q)
    assert not torch.equal(next(build(8).parameters()), next(first.parameters()))
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    assert torch.equal(next(build(g1).parameters()), next(build(g2).parameters()))


@pytest.mark.parametrize("d", [1, 2, 3])
def test_radius_between_two_sets_equals_brute_force(d):
    """Every query's points within r, batched by graph, sorted by query then point, as the all-pairs search finds."""
    g = torch.Generator().manual_seed(d)
    x, y = torch.rand(300, d, generator=g) * 6, torch.rand(80, d, generator=g) * 6
    x[:10] = torch.round(x[:10] / 0.5) * 0.5  # points exactly on multiples of r
    batch_x, batch_y = torch.randint(0, 3, (300,), generator=g), torch.randint(0, 3, (80,), generator=g)
    got = radius(x, y, 0.5, batch_x=batch_x, batch_y=batch_y)
    exact = torch.cdist(y, x, compute_mode="donot_use_mm_for_euclid_dist")
    within = (exact <= 0.5) & (batch_y[:, None] == batch_x[None, :])
    assert torch.equal(got, within.nonzero().T)
    assert radius(x, y[:0], 0.5).shape == (2, 0)
    with pytest.raises(ValueError, match="x, y"):
        radius(x, torch.rand(4, d + 1), 0.5)
