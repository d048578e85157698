"""SynCoGen's sampler: zero constraint violations over 10k graphs drawn from random logits, every sampled graph
decoded or counted invalid (never dropped), the masked path's masking frequency, Kabsch alignment (the core's)
exact on rotated and translated copies, and the network's invariances."""

from __future__ import annotations

import math

import torch

from flowlab.core.geometry import aligned_rmsd, kabsch, kabsch_align
from flowlab.core.paths import LinearSigmaKappa, MaskedDiscretePath
from flowlab.molecular.syncogen.constraints import GraphConstraints, violations
from flowlab.molecular.syncogen.evaluate import Generated, _with_conformer, decode_blocks, score, strain, xtb_energy
from flowlab.molecular.syncogen.model import JointOutput
from flowlab.molecular.syncogen.sample import sample_joint
from flowlab.molecular.syncogen.train import TrainConfig, build_net


class RandomLogits(torch.nn.Module):
    """A stand-in network: fresh standard-normal logits and coordinates at every call."""

    def __init__(self, net) -> None:
        super().__init__()
        self.config, self.g = net.config, torch.Generator().manual_seed(7)

    def forward(self, nodes, edges, x, t, sc=None) -> JointOutput:
        c = self.config
        node_logits = torch.randn(*nodes.shape, c.n_node, generator=self.g) * 3
        edge_logits = torch.randn(*edges.shape, c.n_edge, generator=self.g) * 3
        x_hat = torch.randn(x.shape, generator=self.g)
        return JointOutput(node_logits, edge_logits, x_hat, torch.ones(x.shape[:-1], dtype=torch.bool))


def _random_graphs(vocab, n, *, compatibility=True, steps=4, seed=0):
    net = RandomLogits(build_net("no_sc", vocab, 3, TrainConfig(dim=8, layers=1)))
    constraints = GraphConstraints(vocab, 3, compatibility=compatibility)
    return sample_joint(net, n, steps=steps, constraints=constraints, generator=torch.Generator().manual_seed(seed))


def test_zero_mask_violations_over_10k_random_logits(syncogen_vocab_dir):
    from flowlab.molecular.syncogen.vocabulary import load_vocabulary

    vocab = load_vocabulary(syncogen_vocab_dir)
    out = _random_graphs(vocab, 10_000)
    assert (out.nodes <= vocab.n_blocks).all() and (out.edges < vocab.codec.size).all()  # nothing left masked
    assert int(violations(vocab, out.nodes, out.edges).sum()) == 0
    # without the compatibility mask the same logits break the chemistry: the check is not vacuous
    loose = _random_graphs(vocab, 500, compatibility=False)
    assert int((violations(vocab, loose.nodes, loose.edges) > 0).sum()) > 0


def test_every_graph_decodes_or_is_counted_invalid(syncogen_vocab_dir):
    from flowlab.molecular.syncogen.vocabulary import load_vocabulary

    vocab = load_vocabulary(syncogen_vocab_dir)
    for compat in (True, False):
        out = _random_graphs(vocab, 60, compatibility=compat, seed=1)
        generated = decode_blocks(vocab, out)
        assert len(generated) == 60
        assert all((g.mol is None) == bool(g.reason) for g in generated)
        row = score(generated, set())
        assert row["validity"] == sum(g.mol is not None for g in generated) / 60
    assert row["validity"] < 1  # the ablation's invalid graphs stay in the denominator
    strict = decode_blocks(vocab, _random_graphs(vocab, 200, seed=2))
    assert sum(g.synthesizable for g in strict) / 200 >= 0.95  # constrained random graphs are executable


def test_masking_frequency_matches_linear_sigma():
    path = MaskedDiscretePath(LinearSigmaKappa(1e-3, 7.0), mask_id=99)
    g = torch.Generator().manual_seed(0)
    n = 200_000
    for tau in (0.1, 0.5, 0.9):
        t = torch.full((1,), 1 - tau)
        x1 = torch.zeros(1, n, dtype=torch.long)
        xt = path.sample(path.sample_source(x1.shape), x1, t, generator=g).x_t
        p = 1 - math.exp(-(1e-3 + tau * (7 - 1e-3)))
        freq = float((xt == 99).float().mean())
        assert abs(freq - p) < 4 * math.sqrt(p * (1 - p) / n)  # binomial, 4 sigma


def test_kabsch_exact_on_rotated_and_translated_copies():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 30, 3, generator=g, dtype=torch.float64)
    q, _ = torch.linalg.qr(torch.randn(5, 3, 3, generator=g, dtype=torch.float64))
    q = q * torch.sign(torch.linalg.det(q))[:, None, None]  # proper rotations
    shift = torch.randn(5, 1, 3, generator=g, dtype=torch.float64) * 10
    y = x @ q.transpose(1, 2) + shift
    rot, trans = kabsch(x, y)
    assert torch.allclose(rot, q, atol=1e-10) and torch.allclose(trans, shift[:, 0], atol=1e-9)
    assert torch.allclose(kabsch_align(x, y), y, atol=1e-9)
    assert aligned_rmsd(x, y).max() < 1e-9


def test_network_is_translation_invariant_and_rotation_equivariant(syncogen_tiny):
    from flowlab.molecular.syncogen.views import block_view

    vocab, space, _ = syncogen_tiny
    torch.manual_seed(0)
    net = build_net("syncogen", vocab, 3, TrainConfig(dim=16, layers=2)).double().eval()
    batch = block_view(space).batch(torch.arange(4), torch.zeros(4, dtype=torch.long))
    x = batch["x1"].double() + 0.1 * torch.randn(batch["x1"].shape, dtype=torch.float64)
    t = torch.full((4,), 0.6, dtype=torch.float64)
    q, _ = torch.linalg.qr(torch.randn(3, 3, dtype=torch.float64))
    q = q * torch.sign(torch.linalg.det(q))
    with torch.no_grad():
        a = net(batch["nodes"], batch["edges"], x, t)
        b = net(batch["nodes"], batch["edges"], x @ q.T + torch.tensor([3.0, -2.0, 5.0], dtype=torch.float64), t)
    assert torch.allclose(a.node_logits, b.node_logits, atol=1e-8)
    assert torch.allclose(a.edge_logits, b.edge_logits, atol=1e-8)
    mask = a.atom_mask[..., None]
    assert torch.allclose(a.x @ q.T * mask, b.x * mask, atol=1e-8)


def test_scores_survive_broken_geometry_and_match_rdkit_on_good_one():
    import numpy as np
    from rdkit import Chem
    from rdkit.Chem import AllChem

    mol = Chem.MolFromSmiles("OCC(=O)NCC(=O)O")
    broken = _with_conformer(mol, np.zeros((mol.GetNumAtoms(), 3)))  # every atom on one point
    assert math.isnan(strain(broken)) and math.isnan(xtb_energy(broken))
    molh = Chem.AddHs(mol)
    AllChem.EmbedMolecule(molh, randomSeed=0)
    AllChem.MMFFOptimizeMolecule(molh, maxIters=2000)
    relaxed = Chem.RemoveHs(molh)
    assert 0 <= strain(relaxed) < 1.0  # an MMFF minimum carries (almost) no strain
    row = score([Generated(broken, "a", True), Generated(relaxed, "b", True), Generated(None, "", False, "x")], {"a"})
    assert row["validity"] == 2 / 3 and row["novelty"] == 0.5 and row["strain_failed"] == 0.5
    assert math.isfinite(row["median_strain"])
