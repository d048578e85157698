"""The chemistry vocabulary of SynCoGen: building blocks with their reaction centres and two-component reaction
templates, read from the `syncogen_vocabulary` data set (or a user's folder of the same layout), and the tables the
graph model needs.

A block's centre c is an atom index of its SMILES (`building_blocks.json`). A reaction r has two reactant templates;
`drop[r][k]` says whether reactant k loses its centre atom (a leaving group). The template atom that must sit on the
centre is the template's one unmapped atom when the reactant loses it, else the mapped atom that forms the new bond.
`compatibility[r, k, b, c]` is True when block b's centre c matches reactant k of reaction r.

Edge tokens of the graph (`EdgeCodec`): 0 = no edge; 1 + ((r * 2 + o) * C + c_i) * C + c_j for the pair (i < j) of
nodes, with o = 0 when node i is reactant 0 (o = 1: node j is), c_i, c_j their centres (C = 3).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

DATASET = "syncogen_vocabulary"
FILES = ("building_blocks.json", "reactions.json", "meta.json")

__all__ = ["DATASET", "EdgeCodec", "Vocabulary", "default_vocabulary", "load_vocabulary"]


def _rdkit():
    from rdkit import Chem, RDLogger
    from rdkit.Chem import rdChemReactions

    RDLogger.DisableLog("rdApp.*")
    return Chem, rdChemReactions


@dataclass(frozen=True)
class EdgeCodec:
    """Edge tokens over `n_reactions` reactions and `n_centres` centres per block (see the module docstring)."""

    n_reactions: int
    n_centres: int

    @property
    def size(self) -> int:
        """Number of edge tokens, the no-edge token 0 included."""
        return 1 + self.n_reactions * 2 * self.n_centres**2

    def encode(self, reaction: int, orient: int, c_i: int, c_j: int) -> int:
        """The token of reaction `reaction` with node i as reactant `orient` (0 or 1) and centres c_i, c_j."""
        return 1 + ((reaction * 2 + orient) * self.n_centres + c_i) * self.n_centres + c_j

    def decode(self, token: int) -> tuple[int, int, int, int]:
        """(reaction, orient, c_i, c_j) of a non-zero token."""
        rest, c_j = divmod(token - 1, self.n_centres)
        rest, c_i = divmod(rest, self.n_centres)
        reaction, orient = divmod(rest, 2)
        return reaction, orient, c_i, c_j

    def table(self) -> np.ndarray:
        """(size, 4) int array of (reaction, orient, c_i, c_j) per token; row 0 (no edge) is -1."""
        rows = [(-1, -1, -1, -1)] + [self.decode(e) for e in range(1, self.size)]
        return np.asarray(rows, dtype=np.int64)


@dataclass(frozen=True)
class Vocabulary:
    """Blocks (`smiles`, `centres`: atom indices per block) and reactions (`smarts`, `drop`: whether each reactant
    loses its centre atom), with `max_atoms` heavy atoms per block and `n_centres` centres at most."""

    smiles: tuple[str, ...]
    centres: tuple[tuple[int, ...], ...]
    smarts: tuple[str, ...]
    drop: tuple[tuple[bool, bool], ...]
    max_atoms: int = 16
    n_centres: int = 3

    @property
    def n_blocks(self) -> int:
        """Number of building blocks V."""
        return len(self.smiles)

    @property
    def n_reactions(self) -> int:
        """Number of reaction templates R."""
        return len(self.smarts)

    @property
    def codec(self) -> EdgeCodec:
        """The edge-token codec of this vocabulary."""
        return EdgeCodec(self.n_reactions, self.n_centres)

    @cached_property
    def mols(self) -> tuple:
        """The blocks as RDKit molecules (heavy atoms, in SMILES order)."""
        chem, _ = _rdkit()
        return tuple(chem.MolFromSmiles(s) for s in self.smiles)

    @cached_property
    def reactions(self) -> tuple:
        """The templates as initialised RDKit `ChemicalReaction`s."""
        _, rxn = _rdkit()
        out = []
        for s in self.smarts:
            r = rxn.ReactionFromSmarts(s.replace(" ", ""))
            r.Initialize()
            out.append(r)
        return tuple(out)

    @cached_property
    def centre_queries(self) -> tuple[tuple[int, int], ...]:
        """Per reaction, the template atom index of each reactant that must sit on the block's centre."""
        out = []
        for r, rxn in enumerate(self.reactions):
            product = rxn.GetProductTemplate(0)
            side = {}
            for k in range(2):
                for atom in rxn.GetReactantTemplate(k).GetAtoms():
                    if atom.GetAtomMapNum():
                        side[atom.GetAtomMapNum()] = k
            bonding = set()  # map numbers of product atoms bonded across the two reactants
            for bond in product.GetBonds():
                a, b = bond.GetBeginAtom().GetAtomMapNum(), bond.GetEndAtom().GetAtomMapNum()
                if a in side and b in side and side[a] != side[b]:
                    bonding |= {a, b}
            pair = []
            for k in range(2):
                template = rxn.GetReactantTemplate(k)
                if self.drop[r][k]:
                    hits = [a.GetIdx() for a in template.GetAtoms() if not a.GetAtomMapNum()]
                else:
                    hits = [a.GetIdx() for a in template.GetAtoms() if a.GetAtomMapNum() in bonding]
                if len(hits) != 1:
                    raise ValueError(f"reactions.json: entry {r} ({self.smarts[r]!r}): reactant {k} has "
                                     f"{len(hits)} candidate centre atoms, expected exactly one")  # fmt: skip
                pair.append(hits[0])
            out.append(tuple(pair))
        return tuple(out)

    @cached_property
    def compatibility(self) -> np.ndarray:
        """(R, 2, V, C) bool: block b's centre c can be reactant k of reaction r."""
        table = np.zeros((self.n_reactions, 2, self.n_blocks, self.n_centres), dtype=bool)
        for r, rxn in enumerate(self.reactions):
            for k in range(2):
                template, query = rxn.GetReactantTemplate(k), self.centre_queries[r][k]
                for b, mol in enumerate(self.mols):
                    hit_atoms = {m[query] for m in mol.GetSubstructMatches(template, uniquify=False)}
                    for c, atom in enumerate(self.centres[b]):
                        table[r, k, b, c] = atom in hit_atoms
        return table

    @cached_property
    def atoms_per_block(self) -> np.ndarray:
        """(V,) heavy-atom count of each block."""
        return np.asarray([m.GetNumAtoms() for m in self.mols], dtype=np.int64)

    def firing_reactions(self) -> tuple[int, ...]:
        """The reactions with a compatible block for both reactants (those that can fire in this vocabulary)."""
        comp = self.compatibility
        return tuple(r for r in range(self.n_reactions) if comp[r, 0].any() and comp[r, 1].any())


def _read_json(folder: Path, name: str) -> object:
    file = folder / name
    if not file.is_file():
        raise FileNotFoundError(f"vocabulary: {file} not found (expected {', '.join(FILES)})")
    try:
        return json.loads(file.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{name}: not valid JSON ({err})") from err


def load_vocabulary(folder: str | Path) -> Vocabulary:
    """Read and check a vocabulary folder (`building_blocks.json`, `reactions.json`, `meta.json`).

    Raises ValueError naming the file and entry of an invalid SMILES, reaction SMARTS, centre index or annotation.
    """
    chem, rxn_mod = _rdkit()
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"vocabulary: {folder} is not a folder")
    blocks, reactions, meta = (_read_json(folder, name) for name in FILES)
    if not isinstance(meta, dict) or not isinstance(meta.get("max_atoms_per_bb"), int):
        raise ValueError("meta.json: expected an object with integer max_atoms_per_bb and n_centers")
    max_atoms, n_centres = int(meta["max_atoms_per_bb"]), int(meta.get("n_centers", 3))
    if not isinstance(blocks, dict) or not blocks:
        raise ValueError("building_blocks.json: expected a non-empty object {SMILES: [centre atom indices]}")
    smiles, centres = [], []
    for i, (s, cs) in enumerate(blocks.items()):
        mol = chem.MolFromSmiles(s) if isinstance(s, str) and s.strip() else None
        if mol is None:
            raise ValueError(f"building_blocks.json: entry {i} ({s!r}) is not a valid SMILES")
        if mol.GetNumAtoms() > max_atoms:
            raise ValueError(f"building_blocks.json: entry {i} ({s!r}) has {mol.GetNumAtoms()} heavy atoms, "
                             f"more than meta.json's max_atoms_per_bb {max_atoms}")  # fmt: skip
        ok = isinstance(cs, list) and 0 < len(cs) <= n_centres
        if not ok or not all(isinstance(c, int) and 0 <= c < mol.GetNumAtoms() for c in cs):
            raise ValueError(f"building_blocks.json: entry {i} ({s!r}): expected 1..{n_centres} centre atom indices "
                             f"in [0, {mol.GetNumAtoms()}), got {cs!r}")  # fmt: skip
        smiles.append(s)
        centres.append(tuple(cs))
    if not isinstance(reactions, dict) or not reactions:
        raise ValueError("reactions.json: expected a non-empty object {SMARTS: {drop_bools, index}}")
    smarts, drop = [], []
    for i, (s, info) in enumerate(reactions.items()):
        try:
            rxn = rxn_mod.ReactionFromSmarts(s.replace(" ", "")) if isinstance(s, str) and ">>" in s else None
        except ValueError:
            rxn = None
        if rxn is None or rxn.GetNumReactantTemplates() != 2 or rxn.GetNumProductTemplates() != 1:
            raise ValueError(f"reactions.json: entry {i} ({s!r}) is not a valid two-reactant, one-product "
                             "reaction SMARTS")  # fmt: skip
        bools = info.get("drop_bools") if isinstance(info, dict) else None
        if not (isinstance(bools, list) and len(bools) == 2 and all(isinstance(b, bool) for b in bools)):
            raise ValueError(f"reactions.json: entry {i} ({s!r}): expected drop_bools as two booleans, got {bools!r}")
        smarts.append(s)
        drop.append((bools[0], bools[1]))
    vocab = Vocabulary(tuple(smiles), tuple(centres), tuple(smarts), tuple(drop), max_atoms, n_centres)
    vocab.centre_queries  # noqa: B018 - checks every template has one centre atom per reactant
    return vocab


def default_vocabulary(data_root: str | Path | None = None) -> Vocabulary:
    """The shipped vocabulary under `$FLOWLAB_DATA/syncogen_vocabulary` (or `data_root`)."""
    from flowlab.datasets import path

    return load_vocabulary(path(DATASET, FILES[0], data_root=data_root).parent)
