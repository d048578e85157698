"""ProMoE's layers against independent truth: null-label tokens reach the unconditional expert, the identity gate
is the cosine, the batched dispatch equals a per-token loop, activated FLOPs equal the dense MLP's (counted by
torch's FLOP counter), every parameter gets a gradient, the routing contrastive loss at its planted minimum, the
load-balancing loss at balance, and the dense variant is the core DiT."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from flowlab.core.nets.dit import DiT, TokenContext, dense_mlp
from flowlab.vision_gen.promoe.experts import ExpertBank, dispatch_top1
from flowlab.vision_gen.promoe.layers import DiffMoELite, ExpertChoiceMoE, ProMoEMLP, TokenChoiceMoE
from flowlab.vision_gen.promoe.losses import load_balancing_loss, routing_contrastive_loss
from flowlab.vision_gen.promoe.model import ModelConfig, promoe_dit
from flowlab.vision_gen.promoe.names import VARIANTS

pytestmark = pytest.mark.usefixtures("one_thread")

DIM, HIDDEN, NULL = 8, 12, 10


def _context(labels: torch.Tensor) -> TokenContext:
    return TokenContext(labels=labels, null_label=NULL)


def _expert(bank: ExpertBank, j: int, x: torch.Tensor) -> torch.Tensor:
    """Expert j of the bank on one token (dim,), written out as two matrix-vector products."""
    h = F.gelu(x @ bank.w1[j] + bank.b1[j], approximate="tanh")
    return h @ bank.w2[j] + bank.b2[j]


def _tokens(b: int = 6, n: int = 5, seed: int = 0) -> torch.Tensor:
    return torch.randn(b, n, DIM, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_null_label_tokens_reach_the_unconditional_expert_with_gate_one():
    torch.manual_seed(0)
    layer = ProMoEMLP(DIM, HIDDEN, num_routed=4).double()
    labels = torch.tensor([3, NULL, 0, NULL, 9, 1])
    x = _tokens()
    out = layer(x, context=_context(labels))
    dispatch = out.stats["dispatch"]  # (B, N, 5)
    assert bool(dispatch[labels == NULL][..., 4].all())  # every null-label token: the unconditional expert only
    assert not bool(dispatch[labels == NULL][..., :4].any())
    assert not bool(dispatch[labels != NULL][..., 4].any())  # conditional tokens never go there
    for b in (1, 3):  # output = shared + 1.0 * unconditional expert, recomputed token by token
        for i in range(x.shape[1]):
            want = layer.shared(x[b, i]) + _expert(layer.experts, 4, x[b, i])
            torch.testing.assert_close(out.out[b, i], want, rtol=1e-10, atol=1e-10)
    assert out.stats["routed"].tolist() == [True] * 4 + [False]


def test_null_label_tokens_in_the_dit_with_label_dropout_and_guidance():
    """Through the DiT: labels dropped by class dropout and the guided branch's null labels reach every MoE
    block's unconditional expert."""
    cfg = ModelConfig(dim=16, depth=4, heads=2, num_routed=3, class_dropout=0.5)
    model = promoe_dit(cfg, seed=1).train()
    g = torch.Generator().manual_seed(0)
    y = torch.arange(16) % 10
    out = model(x=torch.randn(16, 1, 8, 8), t=torch.rand(16), y=y, generator=g, return_aux=True)
    dropped = torch.ones(16, dtype=torch.bool)
    for i in (1, 3):
        uncond = out.stats[f"blocks.{i}.dispatch"][..., -1]  # (B, N)
        per_sample = uncond.all(1)
        assert bool((per_sample | ~uncond.any(1)).all())  # a sample's tokens go there all or none
        dropped &= per_sample
    assert 0 < int(dropped.sum()) < 16  # some labels were dropped, and exactly those samples went there
    model.eval()
    stats = model(x=torch.randn(4, 1, 8, 8), t=torch.rand(4), return_aux=True).stats  # y=None: the null label
    assert all(bool(stats[f"blocks.{i}.dispatch"][..., -1].all()) for i in (1, 3))


def test_identity_gate_is_the_raw_cosine_and_other_activations():
    torch.manual_seed(0)
    x = _tokens(4, 3).reshape(-1, DIM)
    is_null = torch.zeros(12, dtype=torch.bool)
    for activation, act in (("identity", lambda z: z), ("softmax", lambda z: z.softmax(-1)),
                            ("sigmoid", torch.sigmoid)):  # fmt: skip
        layer = ProMoEMLP(DIM, HIDDEN, num_routed=5, activation=activation)
        decision = layer.router(x, is_null)
        cos = F.cosine_similarity(x[:, None].float(), layer.router.prototypes[None].float(), dim=-1)
        assert decision.expert.tolist() == cos.argmax(-1).tolist()
        torch.testing.assert_close(decision.gate, act(cos).gather(1, decision.expert[:, None]).squeeze(1))
    layer = ProMoEMLP(DIM, HIDDEN, num_routed=5)
    layer.router.prototypes.data = torch.eye(5, DIM)
    away = -torch.eye(5, DIM).sum(0, keepdim=True)  # cosine -1/sqrt(5) with every prototype: a negative gate, kept
    assert layer.router(away, torch.zeros(1, dtype=torch.bool)).gate.item() == pytest.approx(-1 / math.sqrt(5))


def test_batched_dispatch_equals_a_per_token_loop():
    torch.manual_seed(0)
    bank = ExpertBank(5, DIM, HIDDEN).double()
    x = _tokens(7, 3).reshape(-1, DIM)
    expert = torch.randint(0, 4, (21,))  # expert 4 gets no token
    gate = torch.randn(21, dtype=torch.float64)
    out = dispatch_top1(bank, x, expert, gate)
    want = torch.stack([gate[i] * _expert(bank, int(expert[i]), x[i]) for i in range(21)])
    torch.testing.assert_close(out, want, rtol=1e-6, atol=1e-6)
    assert dispatch_top1(bank, x[:0], expert[:0], gate[:0]).shape == (0, DIM)


@pytest.mark.parametrize("kind", ["promoe", "promoe_no_shared", "tc"])
def test_layer_output_equals_a_per_token_reference(kind):
    torch.manual_seed(0)
    if kind == "tc":
        layer = TokenChoiceMoE(DIM, HIDDEN, num_experts=5)
    else:
        layer = ProMoEMLP(DIM, HIDDEN, num_routed=4, shared=kind == "promoe")
    layer = layer.double()
    labels = torch.tensor([3, NULL, 0, 2, 9, 1])
    x = _tokens()
    out = layer(x, context=_context(labels)).out.reshape(-1, DIM)
    flat = x.reshape(-1, DIM)
    is_null = (labels == NULL)[:, None].expand(6, 5).reshape(-1)
    decision = layer.router(flat) if kind == "tc" else layer.router(flat, is_null)
    for i in range(flat.shape[0]):
        j = int(decision.expert[i])
        want = decision.gate[i].double() * _expert(layer.experts, j, flat[i])
        if kind != "promoe_no_shared":
            want = want + layer.shared(flat[i])
        torch.testing.assert_close(out[i], want, rtol=1e-6, atol=1e-6)


def test_expert_choice_equals_a_per_expert_reference():
    torch.manual_seed(0)
    layer = ExpertChoiceMoE(DIM, HIDDEN, num_experts=4).double()
    x = _tokens()
    out = layer(x, context=_context(torch.zeros(6, dtype=torch.long))).out.reshape(-1, DIM)
    flat = x.reshape(-1, DIM)
    scores = layer.router(flat).scores.double()
    capacity = math.ceil(30 / 4)
    want = layer.shared(flat).clone()
    for j in range(4):  # each expert's own top-C tokens, by sorting its column
        for i in scores[:, j].argsort(descending=True)[:capacity].tolist():
            want[i] += scores[i, j] * _expert(layer.experts, j, flat[i])
    torch.testing.assert_close(out, want, rtol=1e-6, atol=1e-6)


def _flops(module, x: torch.Tensor, **kwargs) -> int:
    with FlopCounterMode(display=False) as counter:
        module(x, **kwargs)
    return counter.get_total_flops()


@pytest.mark.parametrize("kind", ["promoe", "promoe_no_shared", "tc", "ec"])
def test_activated_flops_equal_the_dense_mlps(kind):
    """With a balanced routing (every one of the bank's E experts gets C tokens: ProMoE's unconditional one the
    tokens of a null-label sample), the layer's counted FLOPs are the dense MLP's plus the router's
    (T, dim) x (dim, E_router) product: shared + one half-width expert per token (or, without the shared expert,
    one full-width expert) is the dense MLP's cost."""
    dim, hidden, e, c = 16, 64, 4, 8
    bank = e if kind in ("tc", "ec") else e + 1
    x = torch.zeros(bank, c, dim)
    token = torch.arange(bank * c)
    x.view(-1, dim)[token, token % e] = 1.0  # token i along axis i mod e
    labels = torch.arange(bank)
    if kind.startswith("promoe"):
        shared = kind == "promoe"
        layer = ProMoEMLP(dim, hidden // 2 if shared else hidden, num_routed=e, shared=shared)
        layer.router.prototypes.data = torch.eye(e, dim)
        labels[-1] = NULL  # the last sample's c tokens: the unconditional expert
    else:
        layer = (TokenChoiceMoE if kind == "tc" else ExpertChoiceMoE)(dim, hidden // 2, num_experts=e)
        layer.router.weight.data = 10 * torch.eye(e, dim)
    layer.rcl_weight = layer.lb_weight = 0.0  # count the forward only
    t = bank * c
    out = layer(x, context=_context(labels))
    assert out.stats["tokens_per_expert"].tolist() == [c] * bank
    dense = _flops(dense_mlp(dim, hidden), x)
    moe = _flops(layer, x, context=_context(labels))
    assert moe == dense + 2 * t * dim * e
    assert dense == 2 * 2 * t * dim * hidden  # two matmuls, a multiply and an add each


def test_every_parameter_gets_a_gradient_when_experts_get_no_tokens():
    """One conditional token: a single expert is used, yet every parameter (unused experts, the unconditional
    one, the prototypes) has a finite .grad (what DistributedDataParallel needs); used experts a non-zero one."""
    for variant in (v for v in VARIANTS if v != "dense"):
        model = promoe_dit(ModelConfig(variant=variant, dim=16, depth=2, heads=2, num_routed=3, class_dropout=0.0))
        out = model(x=torch.randn(1, 1, 8, 8), t=torch.rand(1), y=torch.tensor([4]), return_aux=True)
        (out.sample.square().mean() + out.aux_loss + 0 * out.sample.sum()).backward()
        params = dict(model.named_parameters())
        missing = [n for n, p in params.items() if p.requires_grad and (p.grad is None or not p.grad.isfinite().all())]
        assert missing == [], (variant, missing)
        frozen = [n for n, p in params.items() if not p.requires_grad]
        assert frozen == (["blocks.1.mlp.router.prototypes"] if variant == "promoe_kmeans" else []), variant
        assert all(params[n].grad is None for n in frozen)
    torch.manual_seed(0)
    layer = ProMoEMLP(DIM, HIDDEN, num_routed=3)
    x = torch.randn(64, 4, DIM)
    out = layer(x, context=_context(torch.arange(64) % 11))
    (out.out.square().mean() + sum(out.aux_losses.values())).backward()
    used = out.stats["tokens_per_expert"] > 0
    assert bool(used.all())
    assert all(float(layer.experts.w1.grad[j].abs().sum()) > 0 for j in range(4))
    assert float(layer.router.prototypes.grad.abs().sum()) > 0


def test_rcl_planted_minimum_and_closed_form():
    """Orthogonal prototypes equal to their tokens' centroids: L = log(1 + (N_a - 1) exp(-1/tau)), the smallest
    over every matching of centroids to prototypes (each other permutation raises it), and moving a prototype
    toward another expert's centroid raises it."""
    import itertools

    tau, e, dim = 0.07, 4, 6
    protos = torch.eye(e, dim, dtype=torch.float64)
    assign = torch.arange(12) % e
    offsets = torch.zeros(12, dim, dtype=torch.float64)
    offsets[:, 5] = torch.tensor([1.0, -1.0, 0.0]).repeat_interleave(e)  # each expert's offsets sum to zero
    tokens = protos[assign] + offsets
    loss = float(routing_contrastive_loss(tokens, assign, protos, tau=tau))
    assert loss == pytest.approx(math.log(1 + (e - 1) * math.exp(-1 / tau)), rel=1e-9)
    for perm in itertools.permutations(range(e)):
        if list(perm) != list(range(e)):
            assert float(routing_contrastive_loss(tokens, assign, protos[list(perm)], tau=tau)) > loss
    toward = protos.clone()
    toward[0] += 0.3 * protos[1]
    assert float(routing_contrastive_loss(tokens, assign, toward, tau=tau)) > loss


def test_rcl_edge_cases():
    """Left-out tokens (-1) change nothing; one active expert or none: 0; a single-token expert: finite gradients,
    into the tokens too (the centroids are not detached)."""
    g = torch.Generator().manual_seed(0)
    tokens = torch.randn(40, 5, generator=g, dtype=torch.float64) + 3 * torch.eye(5, dtype=torch.float64)[
        torch.arange(40) % 4]  # fmt: skip
    assign = torch.arange(40) % 4
    centroids = torch.stack([tokens[assign == j].mean(0) for j in range(4)])
    at = float(routing_contrastive_loss(tokens, assign, centroids))
    extra = torch.cat([tokens, 100 * torch.randn(5, 5, dtype=torch.float64)])
    left_out = torch.cat([assign, torch.full((5,), -1)])
    assert float(routing_contrastive_loss(extra, left_out, centroids)) == pytest.approx(at, rel=1e-12)
    assert float(routing_contrastive_loss(tokens, torch.zeros(40, dtype=torch.long), centroids)) == 0.0
    protos = centroids.clone().requires_grad_(True)
    lone = tokens[:3].clone().requires_grad_(True)
    none = routing_contrastive_loss(lone, torch.full((3,), -1), protos)
    none.backward()
    assert float(none.detach()) == 0.0 and bool(torch.isfinite(protos.grad).all())
    protos.grad = None
    loss = routing_contrastive_loss(lone, torch.tensor([0, 1, 1]), protos)
    loss.backward()
    assert bool(torch.isfinite(protos.grad).all()) and float(protos.grad[:2].abs().sum()) > 0
    assert float(lone.grad.abs().sum()) > 0  # the centroids are not detached
    with pytest.raises(ValueError, match="tau"):
        routing_contrastive_loss(tokens, assign, centroids, tau=0.0)


def test_load_balancing_loss_is_one_at_balance_and_e_when_collapsed():
    e = 4
    uniform = torch.full((8, e), 1 / e)
    assert float(load_balancing_loss(uniform, torch.arange(8) % e)) == pytest.approx(1.0)
    collapsed = F.one_hot(torch.zeros(8, dtype=torch.long), e).float()
    assert float(load_balancing_loss(collapsed, torch.zeros(8, dtype=torch.long))) == pytest.approx(e)


def test_dense_variant_is_the_core_dit():
    cfg = ModelConfig(variant="dense", dim=32, depth=3, heads=4)
    ours = promoe_dit(cfg, seed=3).eval()
    torch.manual_seed(3)
    core = DiT(8, 2, 1, 32, 3, 4, num_classes=10, class_dropout=0.1).eval()
    assert ours.state_dict().keys() == core.state_dict().keys()
    for key, value in core.state_dict().items():
        assert torch.equal(ours.state_dict()[key], value), key
    x, t, y = torch.randn(5, 1, 8, 8), torch.rand(5), torch.tensor([0, 3, 10, 9, 1])
    for p in (*ours.parameters(), *core.parameters()):  # leave adaLN-Zero's zeros so the outputs differ from 0
        p.data += 0.01
    assert torch.equal(ours(x=x, t=t, y=y), core(x=x, t=t, y=y))


def test_variants_share_activated_parameters():
    """MoE in blocks 1 and 3 only; shared + one expert is the dense MLP's width; every routed variant routes among
    the same 6 experts, ProMoE holding one more (the unconditional one)."""
    experts = {}
    for variant in VARIANTS:
        model = promoe_dit(ModelConfig(variant=variant))
        kinds = [type(block.mlp).__name__ for block in model.blocks]
        if variant == "dense":
            assert kinds == ["Sequential"] * 4
            continue
        assert kinds[0] == kinds[2] == "Sequential" and kinds[1] == kinds[3] != "Sequential"
        mlp = model.blocks[1].mlp
        assert mlp.experts.hidden + (0 if mlp.shared is None else mlp.shared[0].out_features) == 256
        assert (mlp.shared is None) == (variant == "promoe_no_shared")
        assert int(mlp.routed.sum()) == 6
        experts[variant] = mlp.experts.num_experts
    assert experts == {v: 6 if v in ("tc", "ec", "diffmoe", "promoe_no_cond") else 7 for v in experts}


BAD_CONFIGS = [
    ({"variant": "moe"}, "variant"),
    ({"dim": 30}, "patch, dim, heads"),
    ({"class_dropout": 1.0}, "class_dropout"),
    ({"num_routed": 0}, "num_routed"),
    ({"rcl_tau": 0.0}, "rcl_tau"),
    ({"lb_weight": -1.0}, "lb_weight"),
    ({"rcl_weight": math.inf}, "rcl_weight"),
    ({"dim": "64"}, "dim"),
]


@pytest.mark.parametrize(("kwargs", "match"), BAD_CONFIGS)
def test_model_config_rejects_bad_values(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ModelConfig(**kwargs)


def test_layers_reject_bad_input():
    layer = ProMoEMLP(DIM, HIDDEN, num_routed=3)
    with pytest.raises(ValueError, match="context"):
        layer(torch.randn(2, 3, DIM), context=TokenContext())
    with pytest.raises(ValueError, match="x: expected shape"):
        layer(torch.randn(2, DIM), context=_context(torch.zeros(2, dtype=torch.long)))
    with pytest.raises(ValueError, match="activation"):
        ProMoEMLP(DIM, HIDDEN, num_routed=3, activation="relu")
    with pytest.raises(ValueError, match="rcl_weight"):
        ProMoEMLP(DIM, HIDDEN, num_routed=3, rcl_weight=-1)
    with pytest.raises(ValueError, match="num_experts"):
        ExpertBank(0, DIM, HIDDEN)
    with pytest.raises(ValueError, match="capacity_factor"):
        ExpertChoiceMoE(DIM, HIDDEN, num_experts=3, capacity_factor=0)
    for decay in (-0.1, 1, "0.5"):
        with pytest.raises(ValueError, match="threshold_decay"):
            DiffMoELite(DIM, HIDDEN, num_experts=3, threshold_decay=decay)
