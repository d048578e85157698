"""Reassembly: run a building-block graph's reactions in tree order with RDKit and map the product's atoms back to
their (node, atom slot) of origin.

A graph is `blocks: (N,)` block ids (-1 or >= V: no node) and `edges: (P,)` edge tokens over the pairs i < j in
`pair_index(N)` order (see `vocabulary.EdgeCodec`). `assemble` returns an `Assembly` or raises `AssemblyError` with
the reason; callers count a failure as an invalid sample, never drop it. Slot s = node * max_atoms + atom index of
the block's SMILES.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from flowlab.molecular.syncogen.vocabulary import Vocabulary, _rdkit

__all__ = ["Assembly", "AssemblyError", "assemble", "pair_index"]


class AssemblyError(ValueError):
    """A graph that does not decode to an executable reaction sequence (the reason is the message)."""


@dataclass(frozen=True)
class Assembly:
    """The product `mol` (sanitised RDKit heavy-atom molecule), `slots: (n_atoms,)` the slot of each product atom,
    and `route`: one (reaction index, node taking reactant 0's role, node taking reactant 1's role) per step."""

    mol: object
    slots: np.ndarray
    route: tuple[tuple[int, int, int], ...]

    @property
    def smiles(self) -> str:
        """Canonical SMILES of the product."""
        chem, _ = _rdkit()
        return chem.MolToSmiles(self.mol)


def pair_index(n: int) -> list[tuple[int, int]]:
    """The node pairs (i, j), i < j, in edge-token order: (0, 1), (0, 2), ..., (n - 2, n - 1)."""
    return [(i, j) for i in range(n) for j in range(i + 1, n)]


def _slot_mol(vocab: Vocabulary, node: int, block: int):
    chem, _ = _rdkit()
    mol = chem.Mol(vocab.mols[block])
    for atom in mol.GetAtoms():
        atom.SetIntProp("slot", node * vocab.max_atoms + atom.GetIdx())
    return mol


def _side_of_map(rxn) -> dict[int, int]:
    return {a.GetAtomMapNum(): k for k in range(2) for a in rxn.GetReactantTemplate(k).GetAtoms() if a.GetAtomMapNum()}


def _label(product, reactants, side_of_map: dict[int, int]) -> bool:
    """Give every product atom its slot; False when an atom cannot be traced to a reactant atom."""
    for atom in product.GetAtoms():
        if atom.HasProp("slot"):
            continue
        if not (atom.HasProp("old_mapno") and atom.HasProp("react_atom_idx")):
            return False
        k = side_of_map.get(atom.GetIntProp("old_mapno"))
        if k is None:
            return False
        atom.SetIntProp("slot", reactants[k].GetAtomWithIdx(atom.GetIntProp("react_atom_idx")).GetIntProp("slot"))
    return True


def _react(vocab: Vocabulary, reaction: int, reactants: tuple, centre_slots: tuple[int, int], sides: tuple[set, set]):
    """The one product of `reaction` on `reactants` whose new bond sits at the given centre slots, or None."""
    chem, _ = _rdkit()
    rxn, drop = vocab.reactions[reaction], vocab.drop[reaction]
    side_of_map = _side_of_map(rxn)
    anchors = []  # per reactant: slots allowed to carry the new bond
    for k, mol in enumerate(reactants):
        centre = next((a for a in mol.GetAtoms() if a.GetIntProp("slot") == centre_slots[k]), None)
        if centre is None:
            return None
        anchors.append({n.GetIntProp("slot") for n in centre.GetNeighbors()} if drop[k] else {centre_slots[k]})
    for products in rxn.RunReactants(reactants):
        product = products[0]
        if not _label(product, reactants, side_of_map):
            continue
        slots = {a.GetIntProp("slot") for a in product.GetAtoms()}
        if any(drop[k] and centre_slots[k] in slots for k in range(2)):
            continue
        cross = []
        for bond in product.GetBonds():
            a, b = bond.GetBeginAtom().GetIntProp("slot"), bond.GetEndAtom().GetIntProp("slot")
            if (a in sides[0]) != (b in sides[0]):
                cross.append((a, b) if a in sides[0] else (b, a))
        if not cross or not all(a in anchors[0] and b in anchors[1] for a, b in cross):
            continue
        try:
            product = chem.RWMol(product)
            chem.SanitizeMol(product)
        except (ValueError, RuntimeError):
            continue
        return product.GetMol()
    return None


def _tree_order(n_real: list[int], links: dict[int, list[tuple[int, int]]]) -> list[tuple[int, int, int]]:
    """(edge position, visited node, new node) in breadth-first order from the first real node."""
    start, seen, order, queue = n_real[0], {n_real[0]}, [], deque([n_real[0]])
    while queue:
        u = queue.popleft()
        for p, w in links.get(u, []):
            if w not in seen:
                seen.add(w)
                order.append((p, u, w))
                queue.append(w)
    if len(seen) != len(n_real):
        raise AssemblyError(f"disconnected graph: {len(n_real) - len(seen)} of {len(n_real)} blocks unreachable "
                            f"from node {start}")  # fmt: skip
    return order


def assemble(vocab: Vocabulary, blocks, edges) -> Assembly:
    """blocks: (N,) ints, edges: (N(N-1)/2,) ints -> the `Assembly` of the graph, or AssemblyError."""
    chem, _ = _rdkit()
    blocks = [int(b) for b in blocks]
    edges = [int(e) for e in edges]
    pairs, codec = pair_index(len(blocks)), vocab.codec
    if len(edges) != len(pairs):
        raise AssemblyError(f"expected {len(pairs)} edge tokens for {len(blocks)} nodes, got {len(edges)}")
    real = [i for i, b in enumerate(blocks) if 0 <= b < vocab.n_blocks]
    if not real:
        raise AssemblyError("no building block in the graph")
    links: dict[int, list[tuple[int, int]]] = {}
    used = set()
    for p, ((i, j), e) in enumerate(zip(pairs, edges, strict=True)):
        if e == 0:
            continue
        if not 0 < e < codec.size:
            raise AssemblyError(f"edge ({i}, {j}): token {e} outside [0, {codec.size})")
        if i not in real or j not in real:
            raise AssemblyError(f"edge ({i}, {j}) touches an empty node")
        _, _, c_i, c_j = codec.decode(e)
        for node, c in ((i, c_i), (j, c_j)):
            if c >= len(vocab.centres[blocks[node]]) or (node, c) in used:
                raise AssemblyError(f"edge ({i}, {j}): centre {c} of node {node} is missing or already used")
            used.add((node, c))
        links.setdefault(i, []).append((p, j))
        links.setdefault(j, []).append((p, i))
    if len(used) // 2 != len(real) - 1:
        raise AssemblyError(f"not a tree: {len(used) // 2} edges for {len(real)} blocks")
    mol = _slot_mol(vocab, real[0], blocks[real[0]])
    visited, route = {real[0]}, []
    for p, u, w in _tree_order(real, links):
        i, j = pairs[p]
        reaction, orient, c_i, c_j = codec.decode(edges[p])
        centre = {i: c_i, j: c_j}
        role = {i: orient, j: 1 - orient}  # which reactant each node of the pair is
        new = _slot_mol(vocab, w, blocks[w])
        by_role = {role[u]: (mol, u), role[w]: (new, w)}
        reactants = (by_role[0][0], by_role[1][0])
        slot = tuple(n * vocab.max_atoms + vocab.centres[blocks[n]][centre[n]] for n in (by_role[0][1], by_role[1][1]))
        side0 = {
            n * vocab.max_atoms + a for n in (visited if by_role[0][1] == u else {w}) for a in range(vocab.max_atoms)
        }
        side1 = {
            n * vocab.max_atoms + a for n in (visited if by_role[1][1] == u else {w}) for a in range(vocab.max_atoms)
        }
        product = _react(vocab, reaction, reactants, slot, (side0, side1))
        if product is None:
            raise AssemblyError(f"reaction {reaction} does not fire on nodes {by_role[0][1]}, {by_role[1][1]} at "
                                f"their chosen centres")  # fmt: skip
        mol = product
        visited.add(w)
        route.append((reaction, by_role[0][1], by_role[1][1]))
    mol = chem.Mol(mol)
    slots = np.asarray([a.GetIntProp("slot") for a in mol.GetAtoms()], dtype=np.int64)
    return Assembly(mol=mol, slots=slots, route=tuple(route))
