"""The spec's extra comparisons against independent truth: DiffMoE-lite is expert choice in training (with the
predictor's loss and its thresholds' EMA by hand) and predicted capacities at inference (equal to a per-expert
reference, learnable from expert choice's picks); the k-means-routing ablation recovers planted token clusters and
keeps its prototypes frozen through training."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from flowlab.core.nets.dit import TokenContext
from flowlab.vision_gen.kit import load_digits_images
from flowlab.vision_gen.promoe.kmeans import fit_kmeans_prototypes
from flowlab.vision_gen.promoe.layers import DiffMoELite, ExpertChoiceMoE
from flowlab.vision_gen.promoe.model import ModelConfig, promoe_dit
from flowlab.vision_gen.promoe.train import KMEANS_IMAGES, TrainConfig, train_promoe

pytestmark = pytest.mark.usefixtures("one_thread")

DIM, HIDDEN = 8, 12
CONTEXT = TokenContext(labels=torch.zeros(6, dtype=torch.long), null_label=10)


def _expert(layer, j: int, x: torch.Tensor) -> torch.Tensor:
    h = F.gelu(x @ layer.experts.w1[j] + layer.experts.b1[j], approximate="tanh")
    return h @ layer.experts.w2[j] + layer.experts.b2[j]


def _layer(seed: int = 0) -> DiffMoELite:
    torch.manual_seed(seed)
    return DiffMoELite(DIM, HIDDEN, num_experts=4).double()


def test_diffmoe_trains_as_expert_choice_with_the_predictors_bce_and_threshold():
    layer = _layer()
    ec = ExpertChoiceMoE(DIM, HIDDEN, num_experts=4).double()
    ec.load_state_dict({k: v for k, v in layer.state_dict().items() if k.startswith(("router", "experts", "shared"))})
    x = torch.randn(6, 5, DIM, dtype=torch.float64, generator=torch.Generator().manual_seed(1)).requires_grad_()
    ours, theirs = layer.train()(x, context=CONTEXT), ec(x, context=CONTEXT)
    assert torch.equal(ours.out, theirs.out) and torch.equal(ours.stats["dispatch"], theirs.stats["dispatch"])
    p = layer.predictor(x.reshape(-1, DIM)).sigmoid()
    y = theirs.stats["dispatch"].reshape(-1, 4).double()
    bce = -(y * p.log() + (1 - y) * (1 - p).log()).mean()
    assert ours.aux_losses["capacity"].item() == pytest.approx(bce.item(), rel=1e-6)
    # each expert's threshold: 0.95 * 0 + 0.05 * the C-th largest predicted probability (C = ceil(30 / 4) = 8)
    want = 0.05 * p.sort(dim=0, descending=True).values[7]
    torch.testing.assert_close(layer.threshold.double(), want, rtol=1e-5, atol=1e-7)
    ours.aux_losses["capacity"].backward()  # the predictor reads detached tokens: only it learns from its loss
    assert x.grad is None
    assert float(layer.predictor[0].weight.grad.abs().sum()) > 0


def test_diffmoe_inference_equals_a_per_expert_reference():
    """Eval mode: expert j takes its k_j highest-scoring tokens, k_j the tokens whose predicted probability is
    above j's threshold."""
    layer = _layer().eval()
    layer.threshold.copy_(torch.tensor([0.2, 0.5, 0.6, 0.99]))
    x = torch.randn(6, 5, DIM, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    out = layer(x, context=CONTEXT)
    flat = x.reshape(-1, DIM)
    k = (layer.predictor(flat).sigmoid() > layer.threshold).sum(0)
    assert len(set(k.tolist())) > 1  # the experts' loads differ
    scores = (flat.float() @ layer.router.weight.float().T).softmax(-1).double()
    want = layer.shared(flat).clone()
    for j in range(4):
        for i in scores[:, j].argsort(descending=True)[: int(k[j])].tolist():
            want[i] += scores[i, j] * _expert(layer, j, flat[i])
    torch.testing.assert_close(out.out.reshape(-1, DIM), want, rtol=1e-6, atol=1e-6)
    assert out.stats["tokens_per_expert"].tolist() == k.tolist()
    assert out.stats["dispatch"].reshape(-1, 4).sum(0).tolist() == k.tolist()


def test_diffmoe_predictor_learns_expert_choices_picks():
    """Trained on expert choice's picks of fresh batches, the predictor's own per-token calls (probability above the
    expert's threshold) agree with expert choice's picks of a new batch on >= 90 % of the (token, expert) pairs,
    where the untrained predictor's do not; and the predicted loads route as expert choice does."""
    layer = _layer(3).float()
    opt = torch.optim.Adam(layer.predictor.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(4)
    x = torch.randn(64, 8, DIM, generator=g)

    def agreement() -> float:
        picked = layer.train()(x, context=CONTEXT).stats["dispatch"].reshape(-1, 4)
        called = layer.predictor(x.reshape(-1, DIM)).sigmoid() > layer.threshold
        return float((picked == called).float().mean())

    before = agreement()  # the EMA threshold after one batch: most tokens called for every expert
    for _ in range(300):
        loss = layer.train()(torch.randn(32, 8, DIM, generator=g), context=CONTEXT).aux_losses["capacity"]
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert before < 0.6 < 0.9 <= agreement()
    picked = layer.train()(x, context=CONTEXT).stats["dispatch"]
    assert float((picked == layer.eval()(x, context=CONTEXT).stats["dispatch"]).float().mean()) >= 0.9


def _planted_dit():
    """A ProMoE DiT at initialisation (every block the identity, adaLN-Zero) whose patch embedding is zero and whose
    positional embedding puts token n at 10 e_(n mod 3): each MoE layer's input tokens form three planted clusters."""
    model = promoe_dit(ModelConfig(variant="promoe_kmeans", dim=16, depth=4, heads=2, num_routed=3), seed=0)
    model.patchify.weight.data.zero_()
    model.patchify.bias.data.zero_()
    model.pos = 10 * F.one_hot(torch.arange(16) % 3, 16).float()[None]
    return model


def test_kmeans_prototypes_recover_planted_clusters():
    model = _planted_dit()
    x, y = torch.randn(20, 1, 8, 8), torch.arange(20) % 10
    assert fit_kmeans_prototypes(model, x, y, seed=0) == 2
    stats = model.eval()(x=x, t=torch.rand(20), y=y, return_aux=True).stats
    group = torch.arange(16) % 3
    for i in (1, 3):
        expert = stats[f"blocks.{i}.dispatch"].float().argmax(-1)  # (B, N)
        assert bool((expert == expert[:1]).all())  # the same routing for every sample
        mapping = {int(g): int(e) for g, e in zip(group, expert[0], strict=True)}
        assert sorted(mapping.values()) == [0, 1, 2]  # one expert per planted cluster, each cluster whole
        assert [mapping[int(g)] for g in group] == expert[0].tolist()
    assert fit_kmeans_prototypes(promoe_dit(ModelConfig(variant="dense")), x, y) == 0


def test_kmeans_prototypes_stay_frozen_through_training():
    data = load_digits_images(8)
    config = ModelConfig(variant="promoe_kmeans", dim=16, depth=2, heads=2, num_routed=3)
    model = train_promoe(config, TrainConfig(steps=3, batch_size=8, seed=5), data.x, data.y, device="cpu")
    fresh = promoe_dit(config, seed=5)
    pick = torch.randperm(data.x.shape[0], generator=torch.Generator().manual_seed(5))[:KMEANS_IMAGES]
    fit_kmeans_prototypes(fresh, data.x[pick], data.y[pick], seed=5)
    ours, want = model.blocks[1].mlp.router.prototypes, fresh.blocks[1].mlp.router.prototypes
    assert not ours.requires_grad and torch.equal(ours, want)
    assert not torch.equal(model.blocks[1].mlp.experts.w1, fresh.blocks[1].mlp.experts.w1)  # the rest trained


def test_kmeans_rejects_bad_input():
    model = promoe_dit(ModelConfig(variant="promoe_kmeans", dim=16, depth=2, heads=2, num_routed=3))
    with pytest.raises(ValueError, match="images, labels"):
        fit_kmeans_prototypes(model, torch.randn(4, 8, 8), torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError, match="max_tokens"):
        fit_kmeans_prototypes(model, torch.randn(4, 1, 8, 8), torch.zeros(4, dtype=torch.long), max_tokens=0)
    with pytest.raises(ValueError, match="max_tokens: expected at least the 3"):
        fit_kmeans_prototypes(model, torch.randn(4, 1, 8, 8), torch.zeros(4, dtype=torch.long), max_tokens=2)
    many = promoe_dit(ModelConfig(variant="promoe_kmeans", dim=16, depth=2, heads=2, num_routed=20))
    with pytest.raises(ValueError, match="16 tokens cannot give 20 centroids"):
        fit_kmeans_prototypes(many, torch.randn(1, 1, 8, 8), torch.zeros(1, dtype=torch.long))
