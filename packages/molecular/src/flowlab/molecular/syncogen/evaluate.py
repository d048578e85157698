"""Decoding and scoring of generated molecules: validity, synthesizability by construction, uniqueness, novelty,
MMFF94 strain and PoseBusters-style intramolecular checks (written on RDKit), optional GFN2-xTB energy (tblite), and
SDF output with the synthesis route.

Every sample is decoded into a `Generated` record, valid or not, so no sample ever leaves a denominator: validity and
synthesizability are fractions of all samples; uniqueness, novelty, strain and the checks are over the valid ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from flowlab.molecular.syncogen.assemble import AssemblyError, assemble, pair_index
from flowlab.molecular.syncogen.sample import Samples
from flowlab.molecular.syncogen.space import ELEMENTS
from flowlab.molecular.syncogen.vocabulary import Vocabulary, _rdkit

__all__ = ["Generated", "decode_atoms", "decode_blocks", "intramolecular_checks", "score", "strain",
           "with_etkdg", "write_sdf", "xtb_energy"]  # fmt: skip


@dataclass(frozen=True)
class Generated:
    """One sample: `mol` (RDKit heavy-atom molecule with one conformer, or None when invalid), `smiles`,
    `synthesizable` (decodes to an executable reaction sequence; for the atom-level baseline: its product lies in the
    mini SynSpace), `reason` why it is invalid ("" when valid), the `route` ((reaction, SMILES of reactant 0's block,
    SMILES of reactant 1's block) per step) and the `blocks` used."""

    mol: object | None
    smiles: str
    synthesizable: bool
    reason: str = ""
    route: tuple[tuple[int, str, str], ...] = ()
    blocks: tuple[str, ...] = ()


def _with_conformer(mol, xyz: np.ndarray):
    chem, _ = _rdkit()
    from rdkit.Geometry import Point3D

    mol = chem.Mol(mol)
    conf = chem.Conformer(mol.GetNumAtoms())
    for i, p in enumerate(xyz.astype(float)):
        conf.SetAtomPosition(i, Point3D(*p))
    mol.RemoveAllConformers()
    mol.AddConformer(conf, assignId=True)
    return mol


def decode_blocks(vocab: Vocabulary, samples: Samples) -> list[Generated]:
    """Reassemble every sampled block graph and attach its coordinates; failures stay in the list as invalid."""
    out = []
    x = samples.x.detach().cpu().double().numpy()
    for g, (ns, es) in enumerate(zip(samples.nodes.tolist(), samples.edges.tolist(), strict=True)):
        if any(b > vocab.n_blocks for b in ns) or any(e >= vocab.codec.size for e in es):
            out.append(Generated(None, "", False, "a token stayed masked"))
            continue
        try:
            product = assemble(vocab, ns, es)
        except AssemblyError as err:
            out.append(Generated(None, "", False, str(err)))
            continue
        slots = product.slots
        xyz = x[g].reshape(-1, 3)[slots]
        if not np.isfinite(xyz).all():
            out.append(Generated(None, product.smiles, True, "non-finite coordinates"))
            continue
        route = tuple((r, vocab.smiles[ns[a]], vocab.smiles[ns[b]]) for r, a, b in product.route)
        blocks = tuple(vocab.smiles[b] for b in ns if b < vocab.n_blocks)
        out.append(Generated(_with_conformer(product.mol, xyz), product.smiles, True, "", route, blocks))
    return out


_ORDERS = {1: "SINGLE", 2: "DOUBLE", 3: "TRIPLE", 4: "AROMATIC"}


def decode_atoms(samples: Samples, space_smiles: set[str]) -> list[Generated]:
    """Build each atom-level sample from its atom types, bond orders and coordinates; valid when RDKit sanitises it
    as one fragment; synthesizable when its canonical SMILES is one of `space_smiles`."""
    chem, _ = _rdkit()
    out = []
    n_elem, pairs = len(ELEMENTS), pair_index(samples.nodes.shape[1])
    x = samples.x.detach().cpu().double().numpy()[:, :, 0]
    for g, (ns, es) in enumerate(zip(samples.nodes.tolist(), samples.edges.tolist(), strict=True)):
        if any(a > n_elem for a in ns) or any(e > 4 for e in es):
            out.append(Generated(None, "", False, "a token stayed masked"))
            continue
        keep = [i for i, a in enumerate(ns) if a < n_elem]
        if not keep:
            out.append(Generated(None, "", False, "no atom"))
            continue
        index = {a: k for k, a in enumerate(keep)}
        mol = chem.RWMol()
        for i in keep:
            mol.AddAtom(chem.Atom(ELEMENTS[ns[i]]))
        for (i, j), e in zip(pairs, es, strict=True):
            if e and i in index and j in index:
                mol.AddBond(index[i], index[j], getattr(chem.BondType, _ORDERS[e]))
                if e == 4:
                    for a in (i, j):
                        mol.GetAtomWithIdx(index[a]).SetIsAromatic(True)
                    mol.GetBondBetweenAtoms(index[i], index[j]).SetIsAromatic(True)
        try:
            chem.SanitizeMol(mol)
        except (ValueError, RuntimeError) as err:
            out.append(Generated(None, "", False, f"sanitisation: {type(err).__name__}"))
            continue
        smiles = chem.MolToSmiles(mol)
        if "." in smiles:
            out.append(Generated(None, smiles, False, "disconnected"))
            continue
        out.append(Generated(_with_conformer(mol.GetMol(), x[g, keep]), smiles, smiles in space_smiles))
    return out


def with_etkdg(generated: list[Generated], seed: int) -> list[Generated]:
    """The same molecules with an RDKit ETKDGv3 conformer (no force-field relaxation) in place of the generated
    coordinates; a molecule ETKDG cannot embed becomes invalid (counted, reason given)."""
    from rdkit.Chem import AllChem

    chem, _ = _rdkit()
    out = []
    for k, g in enumerate(generated):
        if g.mol is None:
            out.append(g)
            continue
        molh = chem.AddHs(g.mol)
        params = AllChem.ETKDGv3()
        params.randomSeed = seed * 100_000 + k
        if AllChem.EmbedMolecule(molh, params) < 0:
            out.append(Generated(None, g.smiles, g.synthesizable, "ETKDG failed", g.route, g.blocks))
            continue
        heavy = [a.GetIdx() for a in molh.GetAtoms() if a.GetAtomicNum() > 1]
        xyz = molh.GetConformer().GetPositions()[heavy]
        out.append(Generated(_with_conformer(g.mol, xyz), g.smiles, g.synthesizable, "", g.route, g.blocks))
    return out


def strain(mol, max_iters: int = 1000) -> float:
    """MMFF94 strain (kcal/mol) of a heavy-atom conformer: hydrogens placed and relaxed with the heavy atoms fixed
    gives E_generated; a full local minimisation from there gives E_relaxed; strain = E_generated - E_relaxed (NaN
    when MMFF has no parameters, coincident atoms leave no room for the hydrogens, or the minimiser's line search
    fails on a broken geometry)."""
    from rdkit.Chem import AllChem

    chem, _ = _rdkit()
    try:
        molh = chem.AddHs(mol, addCoords=True)
    except RuntimeError:  # coincident heavy atoms: RDKit cannot place the hydrogens
        return math.nan
    props = AllChem.MMFFGetMoleculeProperties(molh)
    if props is None:
        return math.nan
    ff = AllChem.MMFFGetMoleculeForceField(molh, props)
    for atom in molh.GetAtoms():
        if atom.GetAtomicNum() > 1:
            ff.AddFixedPoint(atom.GetIdx())
    try:
        ff.Minimize(maxIts=200)
        generated = ff.CalcEnergy()
        ff = AllChem.MMFFGetMoleculeForceField(molh, props)
        ff.Minimize(maxIts=max_iters)
    except RuntimeError:  # RDKit's BFGS invariant ("bad direction in linearSearch") on overlapping atoms
        return math.nan
    return float(generated - ff.CalcEnergy())


def intramolecular_checks(mol) -> dict[str, bool]:
    """PoseBusters-style checks of a heavy-atom conformer against RDKit's distance-geometry bounds: bond lengths and
    bond angles (1-3 distances) within [0.75 lower, 1.25 upper], no clash (pairs 3+ bonds apart at >= 0.7 lower), and
    aromatic rings planar (every atom within 0.25 Å of the ring's best-fit plane)."""
    chem, _ = _rdkit()
    from rdkit.Chem import rdDistGeom

    bounds = rdDistGeom.GetMoleculeBoundsMatrix(mol)
    upper, lower = np.triu(bounds), np.tril(bounds).T
    xyz = mol.GetConformer().GetPositions()
    d = np.linalg.norm(xyz[:, None] - xyz[None], axis=-1)
    topo = chem.GetDistanceMatrix(mol)
    iu = np.triu_indices(len(xyz), 1)
    dd, lo, up, tp = d[iu], lower[iu], upper[iu], topo[iu]

    def within(sel: np.ndarray) -> bool:
        return bool(np.all((dd[sel] >= 0.75 * lo[sel]) & (dd[sel] <= 1.25 * up[sel])))

    planar = True
    for ring in mol.GetRingInfo().AtomRings():
        if all(mol.GetAtomWithIdx(a).GetIsAromatic() for a in ring):
            p = xyz[list(ring)] - xyz[list(ring)].mean(0)
            normal = np.linalg.svd(p)[2][-1]
            planar &= bool(np.abs(p @ normal).max() <= 0.25)
    return {"bond_lengths": within(tp == 1), "bond_angles": within(tp == 2),
            "no_clash": bool(np.all(dd[tp >= 3] >= 0.7 * lo[tp >= 3])), "aromatic_planar": planar}  # fmt: skip


def xtb_energy(mol) -> float:
    """GFN2-xTB single-point energy (Hartree) of the heavy-atom conformer with hydrogens placed by RDKit (tblite);
    NaN when the geometry cannot be evaluated."""
    from tblite.interface import Calculator

    chem, _ = _rdkit()
    try:
        molh = chem.AddHs(mol, addCoords=True)
        numbers = np.array([a.GetAtomicNum() for a in molh.GetAtoms()])
        xyz = molh.GetConformer().GetPositions() / 0.529177210903  # Å -> Bohr
        calc = Calculator("GFN2-xTB", numbers, xyz, charge=float(chem.GetFormalCharge(molh)))
        calc.set("verbosity", 0)
        return float(calc.singlepoint().get("energy"))
    except RuntimeError:  # coincident atoms, or an SCF that does not converge on a broken geometry
        return math.nan


def score(generated: list[Generated], train_smiles: set[str], *, xtb: int = 0) -> dict[str, float]:
    """The metrics of the module docstring over all samples (`xtb`: mean GFN2-xTB energy of that many valid ones)."""
    n = len(generated)
    if n == 0:
        raise ValueError("generated: expected at least one sample")
    valid = [g for g in generated if g.mol is not None]
    unique = {g.smiles for g in valid}
    strains = np.array([strain(g.mol) for g in valid]) if valid else np.array([math.nan])
    checks = [intramolecular_checks(g.mol) for g in valid]
    row = {
        "validity": len(valid) / n,
        "synthesizability": sum(g.synthesizable for g in generated) / n,
        "uniqueness": len(unique) / max(len(valid), 1),
        "novelty": len(unique - train_smiles) / max(len(unique), 1),
        "median_strain": float(np.nanmedian(strains)) if np.isfinite(strains).any() else math.nan,
        "strain_failed": float(np.mean(~np.isfinite(strains))) if valid else 0.0,
        "pb_valid": float(np.mean([all(c.values()) for c in checks])) if checks else 0.0,
    }
    for key in ("bond_lengths", "bond_angles", "no_clash", "aromatic_planar"):
        row[f"pb_{key}"] = float(np.mean([c[key] for c in checks])) if checks else 0.0
    if xtb and valid:
        energies = np.array([xtb_energy(g.mol) for g in valid[:xtb]])
        if np.isfinite(energies).any():
            row["xtb_energy"] = float(np.nanmean(energies))
    return row


def write_sdf(path: str | Path, generated: list[Generated]) -> int:
    """Write the valid molecules with their coordinates to an SDF file, with the SMILES, the building blocks and
    the synthesis route (one "reaction r: block + block" per step) as properties; returns how many were written."""
    chem, _ = _rdkit()
    writer = chem.SDWriter(str(path))
    count = 0
    for k, g in enumerate(generated):
        if g.mol is None:
            continue
        mol = chem.Mol(g.mol)
        mol.SetProp("_Name", f"sample_{k}")
        mol.SetProp("smiles", g.smiles)
        mol.SetProp("synthesizable", str(g.synthesizable))
        mol.SetProp("building_blocks", " | ".join(g.blocks))
        mol.SetProp("route", " ; ".join(f"reaction {r}: {a} + {b}" for r, a, b in g.route))
        writer.write(mol)
        count += 1
    writer.close()
    return count
