"""The mini SynSpace: random compatible assemblies of 2..`max_blocks` building blocks (tree-shaped, one product,
deduplicated by canonical SMILES), each with ETKDGv3 + MMFF94 conformers, built in worker processes and cached as the
artifact "mol.syncogen_space" (its key covers the vocabulary files' SHA-256).

`SynSpace` holds padded tensors for M molecules: graphs `blocks: (M, N)` (V = no node), `edges: (M, P)`, per-slot
coordinates `coords: (M, K, N, A, 3)` (K conformers, A = max atoms per block) with `slot_mask: (M, N, A)` (the
product's atoms), product bonds in slot space `bonds: (M, B, 2)` (-1 padded), and the atom-level view for the
baseline: `elements: (M, L)` (index into ELEMENTS, -1 padded), `bond_orders: (M, L, L)` (0 none, 1-3, 4 aromatic),
`atom_slots: (M, L)`; `split: (M,)` 0 train, 1 validation, 2 test (80/10/10 by molecule); `smiles`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from flowlab.core.artifacts import Artifact, ensure
from flowlab.core.bench import parallel_map
from flowlab.core.config import Config
from flowlab.molecular.syncogen.assemble import AssemblyError, assemble, pair_index
from flowlab.molecular.syncogen.vocabulary import DATASET, FILES, Vocabulary, _rdkit, load_vocabulary

__all__ = ["ELEMENTS", "SpaceConfig", "SynSpace", "embed_conformers", "load_space", "sample_graph", "space_artifact"]

ELEMENTS = ("C", "N", "O", "B", "F", "Cl", "Br", "S")
_BOND = {1.0: 1, 2.0: 2, 3.0: 3, 1.5: 4}


@dataclass(frozen=True)
class SpaceConfig(Config):
    """`n_molecules` distinct products of 2..`max_blocks` blocks with `n_conformers` each, from `seed`, in up to
    `workers` processes."""

    n_molecules: int = 2000
    max_blocks: int = 3
    n_conformers: int = 1
    seed: int = 0
    workers: int = 2

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.n_molecules < 10:
            raise ValueError(f"n_molecules: expected >= 10, got {self.n_molecules}")
        if not 2 <= self.max_blocks <= 4:
            raise ValueError(f"max_blocks: expected 2..4, got {self.max_blocks}")
        if not 1 <= self.n_conformers <= 10:
            raise ValueError(f"n_conformers: expected 1..10, got {self.n_conformers}")
        if self.workers < 1:
            raise ValueError(f"workers: expected >= 1, got {self.workers}")


@dataclass(frozen=True)
class SynSpace:
    """The padded tensors described in the module docstring."""

    blocks: torch.Tensor
    edges: torch.Tensor
    coords: torch.Tensor
    slot_mask: torch.Tensor
    bonds: torch.Tensor
    elements: torch.Tensor
    bond_orders: torch.Tensor
    atom_slots: torch.Tensor
    split: torch.Tensor
    smiles: tuple[str, ...]

    def subset(self, split: int) -> SynSpace:
        """The molecules of one split (0 train, 1 validation, 2 test)."""
        keep = self.split == split
        fields = {k: getattr(self, k)[keep] for k in self.__dataclass_fields__ if k != "smiles"}
        return SynSpace(**fields, smiles=tuple(s for s, k in zip(self.smiles, keep.tolist(), strict=True) if k))


def sample_graph(vocab: Vocabulary, n_blocks: int, n_nodes: int, rng: np.random.Generator):
    """A random compatible tree of `n_blocks` blocks on `n_nodes` node positions (shuffled): (blocks, edges)."""
    comp, codec = vocab.compatibility, vocab.codec
    firing = vocab.firing_reactions()
    nodes: list[int] = []
    links: list[tuple[int, int, int, int, int, int]] = []  # (u, w, reaction, role of u, centre u, centre w)
    free: list[tuple[int, int]] = []  # (node, centre) still unused
    for _ in range(200):
        if len(nodes) == n_blocks:
            break
        r = int(rng.choice(firing))
        if not nodes:
            options = np.argwhere(comp[r, 0])
            b, c = options[rng.integers(len(options))]
            nodes.append(int(b))
            free += [(0, k) for k in range(len(vocab.centres[int(b)])) if k != int(c)]
            free.append((0, int(c)))
            continue
        if not free:
            return None
        u, cu = free[rng.integers(len(free))]
        role = int(rng.integers(2))
        if not comp[r, role, nodes[u], cu]:
            continue
        options = np.argwhere(comp[r, 1 - role])
        b, c = (int(x) for x in options[rng.integers(len(options))])
        w = len(nodes)
        nodes.append(b)
        free.remove((u, cu))
        free += [(w, k) for k in range(len(vocab.centres[b])) if k != c]
        links.append((u, w, r, role, cu, c))
    if len(nodes) != n_blocks:
        return None
    perm = rng.permutation(n_nodes)[:n_blocks]  # node k sits at position perm[k]
    blocks = np.full(n_nodes, vocab.n_blocks, dtype=np.int64)
    blocks[perm] = nodes
    pos = {p: k for k, p in enumerate(pair_index(n_nodes))}
    edges = np.zeros(len(pos), dtype=np.int64)
    for u, w, r, role, cu, cw in links:
        i, j = int(perm[u]), int(perm[w])
        if i < j:
            edges[pos[(i, j)]] = codec.encode(r, role, cu, cw)
        else:
            edges[pos[(j, i)]] = codec.encode(r, 1 - role, cw, cu)
    return blocks, edges


def embed_conformers(mol, n: int, seed: int) -> np.ndarray | None:
    """ETKDGv3 (seeded) + MMFF94 conformers of a heavy-atom molecule: (n, n_atoms, 3) heavy-atom coordinates in Å,
    or None when embedding or MMFF fails."""
    chem, _ = _rdkit()
    from rdkit.Chem import AllChem

    molh = chem.AddHs(mol)
    params = AllChem.ETKDGv3()
    params.randomSeed = int(seed)
    ids = list(AllChem.EmbedMultipleConfs(molh, numConfs=n, params=params))
    if len(ids) < n or not AllChem.MMFFHasAllMoleculeParams(molh):
        return None
    AllChem.MMFFOptimizeMoleculeConfs(molh, maxIters=500)
    heavy = [a.GetIdx() for a in molh.GetAtoms() if a.GetAtomicNum() > 1]
    return np.stack([molh.GetConformer(i).GetPositions()[heavy] for i in ids]).astype(np.float32)


def _chunk(folder: str, n_target: int, max_blocks: int, n_conf: int, seed: int) -> list[dict]:
    """Worker: up to n_target molecules (with conformers) from the chunk's own seed."""
    vocab = load_vocabulary(folder)
    rng = np.random.default_rng(seed)
    out, seen = [], set()
    for _ in range(20 * n_target):
        if len(out) >= n_target:
            break
        graph = sample_graph(vocab, int(rng.integers(2, max_blocks + 1)), max_blocks, rng)
        if graph is None:
            continue
        try:
            product = assemble(vocab, *graph)
        except AssemblyError:
            continue
        smiles = product.smiles
        if smiles in seen or any(a.GetSymbol() not in ELEMENTS for a in product.mol.GetAtoms()):
            continue
        seen.add(smiles)
        coords = embed_conformers(product.mol, n_conf, seed=int(rng.integers(2**31)))
        if coords is None:
            continue
        bonds = [(b.GetBeginAtomIdx(), b.GetEndAtomIdx(), _BOND.get(b.GetBondTypeAsDouble(), 1))
                 for b in product.mol.GetBonds()]  # fmt: skip
        elements = [ELEMENTS.index(a.GetSymbol()) for a in product.mol.GetAtoms()]
        out.append({"blocks": graph[0], "edges": graph[1], "slots": product.slots, "coords": coords,
                    "bonds": bonds, "elements": elements, "smiles": smiles})  # fmt: skip
    return out


def _pack(records: list[dict], vocab: Vocabulary, n_nodes: int, n_conf: int, seed: int) -> dict[str, torch.Tensor]:
    m, a = len(records), vocab.max_atoms
    n_atoms = max(len(r["elements"]) for r in records)
    n_bonds = max(len(r["bonds"]) for r in records)
    t = {
        "blocks": torch.tensor(np.stack([r["blocks"] for r in records])),
        "edges": torch.tensor(np.stack([r["edges"] for r in records])),
        "coords": torch.zeros(m, n_conf, n_nodes, a, 3),
        "slot_mask": torch.zeros(m, n_nodes, a, dtype=torch.bool),
        "bonds": torch.full((m, n_bonds, 2), -1, dtype=torch.long),
        "elements": torch.full((m, n_atoms), -1, dtype=torch.long),
        "bond_orders": torch.zeros(m, n_atoms, n_atoms, dtype=torch.uint8),
        "atom_slots": torch.full((m, n_atoms), -1, dtype=torch.long),
    }
    for k, r in enumerate(records):
        slots = torch.tensor(r["slots"])
        node, atom = slots // a, slots % a
        t["coords"][k][:, node, atom] = torch.tensor(r["coords"])
        t["slot_mask"][k, node, atom] = True
        n = len(r["elements"])
        t["elements"][k, :n] = torch.tensor(r["elements"])
        t["atom_slots"][k, :n] = slots
        for i, (u, w, order) in enumerate(r["bonds"]):
            t["bonds"][k, i] = torch.tensor([int(slots[u]), int(slots[w])])
            t["bond_orders"][k, u, w] = t["bond_orders"][k, w, u] = order
    perm = torch.randperm(m, generator=torch.Generator().manual_seed(seed))
    split = torch.zeros(m, dtype=torch.long)
    split[perm[int(0.8 * m) : int(0.9 * m)]] = 1
    split[perm[int(0.9 * m) :]] = 2
    t["split"] = split
    return t


@dataclass(frozen=True)
class _Build(Config):
    space: SpaceConfig
    folder: str


def _build(config: _Build, out: Path) -> None:
    cfg, vocab = config.space, load_vocabulary(config.folder)
    chunks = 4 * cfg.workers
    per = math.ceil(1.15 * cfg.n_molecules / chunks)
    parts = parallel_map(_chunk, [config.folder] * chunks, [per] * chunks, [cfg.max_blocks] * chunks,
                         [cfg.n_conformers] * chunks, [cfg.seed * 1000 + i for i in range(chunks)],
                         workers=cfg.workers)  # fmt: skip
    records, seen = [], set()
    for rec in (r for part in parts for r in part):
        if rec["smiles"] not in seen:
            seen.add(rec["smiles"])
            records.append(rec)
    if len(records) < 10:
        raise ValueError(f"vocabulary: only {len(records)} molecules could be built")
    records = records[: cfg.n_molecules]
    torch.save(_pack(records, vocab, cfg.max_blocks, cfg.n_conformers, cfg.seed), out / "space.pt")
    (out / "smiles.json").write_text(json.dumps([r["smiles"] for r in records]))


def space_artifact(config: SpaceConfig, vocab_folder: str | Path) -> Artifact:
    """The cached artifact "mol.syncogen_space" of `config` over the vocabulary in `vocab_folder`."""
    folder = Path(vocab_folder).resolve()
    # measured: the quick space in 54 s in a cold `flowlab bench`, another build beside it
    seconds = 0.02 * config.n_molecules * config.n_conformers * config.max_blocks / min(config.workers, 2)
    return Artifact("mol.syncogen_space", _build, _Build(config, str(folder)),
                    inputs=tuple(folder / f for f in FILES), expected_seconds=seconds,
                    description="mini SynSpace: assembled products with ETKDG + MMFF conformers")  # fmt: skip


def load_space(config: SpaceConfig, data_root: str | Path | None = None, *, vocab_folder=None) -> SynSpace:
    """Build (once, cached) and load the mini SynSpace of `config` over the shipped (or a given) vocabulary."""
    if vocab_folder is None:
        from flowlab.datasets import path

        vocab_folder = path(DATASET, FILES[0], data_root=data_root).parent
    entry = ensure(space_artifact(config, vocab_folder))
    t = torch.load(entry.path / "space.pt", weights_only=True)
    return SynSpace(**t, smiles=tuple(json.loads((entry.path / "smiles.json").read_text())))
