"""ProMoE's routing analysis on hand-built routing tables (against scikit-learn's NMI and SciPy's Jensen-Shannon
distance, and planted extremes), the heat map, and `routing_analysis` of small untrained models."""

from __future__ import annotations

import math

import pytest
import torch
from scipy.spatial.distance import jensenshannon
from sklearn.metrics import normalized_mutual_info_score

from flowlab.vision_gen.promoe.analysis import (
    contingency,
    dead_experts,
    expert_class_nmi,
    routing_heatmap,
    subspace_similarity,
    utilisation_divergence,
    utilisation_entropy,
)
from flowlab.vision_gen.promoe.evaluate import routing_analysis
from flowlab.vision_gen.promoe.model import ModelConfig, promoe_dit

pytestmark = pytest.mark.usefixtures("one_thread")


def _hard(labels: torch.Tensor, experts: torch.Tensor, e: int) -> torch.Tensor:
    return contingency(torch.nn.functional.one_hot(experts, e), labels, 10)


def test_contingency_counts_pairs():
    dispatch = torch.tensor([[1, 0, 1], [0, 1, 0], [1, 0, 0]], dtype=torch.bool)  # token 0 taken by two experts
    table = contingency(dispatch, torch.tensor([2, 2, 0]), 3)
    assert table.tolist() == [[1, 0, 0], [0, 0, 0], [1, 1, 1]]


def test_nmi_matches_scikit_learn_and_its_extremes():
    g = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 10, (500,), generator=g)
    experts = (labels + torch.randint(0, 3, (500,), generator=g)) % 6  # related, not determined
    ours = expert_class_nmi(_hard(labels, experts, 6))
    assert ours == pytest.approx(normalized_mutual_info_score(labels.numpy(), experts.numpy()), abs=1e-10)
    assert expert_class_nmi(torch.eye(10)) == pytest.approx(1.0)  # expert = class
    assert expert_class_nmi(torch.ones(10, 1)[:, :1] @ torch.ones(1, 6)) == pytest.approx(0.0, abs=1e-12)
    assert expert_class_nmi(torch.tensor([[5.0, 0.0]])) == 0.0  # one class, one expert: no information


def test_js_divergence_matches_scipy_and_its_extremes():
    g = torch.Generator().manual_seed(1)
    table = torch.rand(10, 6, generator=g, dtype=torch.float64)
    a, b = table[:5].sum(0), table[5:].sum(0)
    want = jensenshannon((a / a.sum()).numpy(), (b / b.sum()).numpy()) ** 2
    assert utilisation_divergence(table, range(5), range(5, 10)) == pytest.approx(want, rel=1e-9)
    disjoint = torch.zeros(10, 6)
    disjoint[:5, :3], disjoint[5:, 3:] = 1.0, 1.0
    assert utilisation_divergence(disjoint, range(5), range(5, 10)) == pytest.approx(math.log(2))
    assert utilisation_divergence(torch.ones(10, 6), range(5), range(5, 10)) == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="disjoint"):
        utilisation_divergence(table, [0, 1], [1, 2])


def test_entropy_and_dead_experts():
    assert utilisation_entropy(torch.ones(6)) == pytest.approx(1.0)
    assert utilisation_entropy(torch.tensor([4.0, 0, 0, 0])) == pytest.approx(0.0)
    assert utilisation_entropy(torch.tensor([1.0, 1.0, 0.0, 0.0])) == pytest.approx(math.log(2) / math.log(4))
    assert dead_experts(torch.tensor([3.0, 0.0, 1.0, 0.0])) == 2
    assert dead_experts(torch.zeros(3)) == 3  # no token routed: every expert dead
    with pytest.raises(ValueError, match="non-negative"):
        dead_experts(torch.tensor([1.0, -1.0]))
    for bad in (torch.zeros(3), torch.tensor([1.0, -1.0]), torch.tensor([1.0, float("nan")])):
        with pytest.raises(ValueError, match="table"):
            utilisation_entropy(bad)


def test_subspace_similarity_planted():
    g = torch.Generator().manual_seed(0)
    w = torch.randn(1, 8, 5, generator=g, dtype=torch.float64)
    rotation, _ = torch.linalg.qr(torch.randn(5, 5, generator=g, dtype=torch.float64))
    same = torch.cat([w, w @ rotation, 2 * w])  # one column space three times
    assert subspace_similarity(same, 3) == pytest.approx(1.0, abs=1e-9)
    planted = torch.zeros(4, 8, 5, dtype=torch.float64)
    for j in range(4):  # expert j spans axes 2j, 2j+1 of R^8: mutually orthogonal subspaces
        planted[j, 2 * j, 0], planted[j, 2 * j + 1, 1] = 3.0, 2.0
    assert subspace_similarity(planted, 2) == pytest.approx(0.0, abs=1e-12)
    half = planted.clone()
    half[1] = planted[0] + planted[1]  # spans (e0 + e2, e1 + e3): principal angles of 45 degrees to expert 0
    assert subspace_similarity(half[:2], 2) == pytest.approx(math.sqrt(0.5))
    with pytest.raises(ValueError, match="rank"):
        subspace_similarity(planted, 6)
    with pytest.raises(ValueError, match="weights"):
        subspace_similarity(planted[:1], 2)


def test_heatmap_writes_a_png(tmp_path):
    path = tmp_path / "heat.png"
    routing_heatmap(path, {"promoe": torch.eye(10, 6), "tc": torch.ones(10, 6)})
    assert path.read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match="tables"):
        routing_heatmap(path, {})


def test_routing_analysis_of_small_models():
    images, labels = torch.randn(30, 1, 8, 8), torch.arange(30) % 10
    for variant in ("promoe", "tc", "ec", "promoe_no_cond"):
        model = promoe_dit(ModelConfig(variant=variant, dim=16, depth=4, heads=2, num_routed=3), seed=0)
        result = routing_analysis(model, images, labels, times=(0.3, 0.7), rank=2)
        assert sorted(result.tables) == ["1@t=0.3", "1@t=0.7", "3@t=0.3", "3@t=0.7"]
        for table in result.tables.values():  # routed experts only (ProMoE's unconditional one left out); every
            assert table.shape == (10, 3) and float(table.sum()) == 30 * 16  # token once (EC: 3 picks of 160)
        m = result.metrics
        assert 0 <= m["nmi"] <= 1 and 0 <= m["js_divergence"] <= math.log(2) and 0 <= m["subspace_similarity"] <= 1
        per_block = {i: [expert_class_nmi(result.tables[f"{i}@t={t}"]) for t in (0.3, 0.7)] for i in (1, 3)}
        for i, values in per_block.items():  # per block: the mean over times; the blocks' mean is the nmi
            assert m[f"nmi_block{i}"] == pytest.approx(sum(values) / 2, abs=1e-12)
        assert m["nmi"] == pytest.approx((m["nmi_block1"] + m["nmi_block3"]) / 2, abs=1e-12)
        assert m["experts_per_token"] == pytest.approx(1.0)  # top-1 routing and expert choice at capacity 1
        assert m["null_to_uncond"] == 1.0 if variant == "promoe" else "null_to_uncond" not in m
        assert model.training  # left in the mode it was in
    diffmoe = promoe_dit(ModelConfig(variant="diffmoe", dim=16, depth=4, heads=2, num_routed=3), seed=0)
    for thresholds, experts in (([-1.0] * 3, 3.0), ([2.0, -1.0, -1.0], 2.0)):  # below / above every probability
        for i in (1, 3):
            diffmoe.blocks[i].mlp.threshold.copy_(torch.tensor(thresholds))
        metrics = routing_analysis(diffmoe, images, labels, times=(0.3,), rank=2).metrics
        assert metrics["experts_per_token"] == experts and metrics["dead_experts"] == 3 - experts
    for i in (1, 3):  # above every probability: no token routed, the routing measures undefined (NaN), no error
        diffmoe.blocks[i].mlp.threshold.fill_(2.0)
    metrics = routing_analysis(diffmoe, images, labels, times=(0.3,), rank=2).metrics
    assert metrics["experts_per_token"] == 0.0 and metrics["dead_experts"] == 3
    assert all(math.isnan(metrics[k]) for k in ("nmi", "nmi_block1", "js_divergence", "utilisation_entropy"))
    dense = promoe_dit(ModelConfig(variant="dense", dim=16, depth=2, heads=2))
    assert routing_analysis(dense, images, labels).metrics == {}
