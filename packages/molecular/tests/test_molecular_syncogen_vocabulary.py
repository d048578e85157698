"""SynCoGen's vocabulary, reassembly and mini SynSpace: the shipped files parse, exactly the reactions the data set's
README lists can fire, a known amide coupling gives its product, stored graphs reassemble to their SMILES with a
bijective atom <-> slot map, and a user vocabulary with a bad SMILES or SMARTS is refused naming the entry."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from rdkit import Chem

from flowlab.molecular.syncogen.assemble import AssemblyError, assemble
from flowlab.molecular.syncogen.vocabulary import load_vocabulary


def test_shipped_vocabulary_parses_and_fires_as_documented(syncogen_vocab_dir):
    vocab = load_vocabulary(syncogen_vocab_dir)
    assert vocab.n_blocks == 93 and vocab.n_reactions == 19
    assert all(m is not None for m in vocab.mols)
    never = {1, 7, 9, 16, 17}  # aryl iodide, alkyl CH2-Br and CH2-I electrophiles: no first reactant
    assert set(vocab.firing_reactions()) == set(range(19)) - never
    comp = vocab.compatibility
    assert {r for r in range(19) if not comp[r, 0].any()} == never


def test_known_amide_coupling_gives_the_amide(syncogen_vocab_dir):
    vocab = load_vocabulary(syncogen_vocab_dir)
    acid, amine = vocab.smiles.index("OCC(O)=O"), vocab.smiles.index("NCC(O)=O")  # glycolic acid, glycine
    acid_centre = vocab.centres[acid].index(3)  # the acid's OH oxygen (atom 3 of OCC(O)=O)
    amine_centre = vocab.centres[amine].index(0)  # glycine's N
    product = assemble(vocab, [acid, amine], [vocab.codec.encode(4, 0, acid_centre, amine_centre)])
    assert product.smiles == Chem.CanonSmiles("OCC(=O)NCC(=O)O")
    assert product.route == ((4, 0, 1),)
    with pytest.raises(AssemblyError, match="does not fire"):  # the amine's N is not an acid: reversed roles fail
        assemble(vocab, [acid, amine], [vocab.codec.encode(4, 1, acid_centre, amine_centre)])


def test_graph_errors_are_reasons_not_crashes(syncogen_vocab_dir):
    vocab = load_vocabulary(syncogen_vocab_dir)
    with pytest.raises(AssemblyError, match="not a tree"):
        assemble(vocab, [0, 1, 2], [0, 0, 0])
    with pytest.raises(AssemblyError, match="empty node"):
        assemble(vocab, [0, 93], [vocab.codec.encode(4, 0, 0, 0)])
    with pytest.raises(AssemblyError, match="no building block"):
        assemble(vocab, [93, 93], [0])


def test_stored_graphs_reassemble_with_a_bijective_slot_map(syncogen_tiny):
    vocab, space, _ = syncogen_tiny
    a = vocab.max_atoms
    for k in range(len(space.smiles)):
        product = assemble(vocab, space.blocks[k].tolist(), space.edges[k].tolist())
        assert product.smiles == space.smiles[k]
        slots = product.slots
        assert len(set(slots.tolist())) == len(slots)  # injective onto the kept slots
        kept = np.flatnonzero(space.slot_mask[k].reshape(-1).numpy())
        assert sorted(slots.tolist()) == kept.tolist()  # and onto: exactly the product's atoms
        assert (slots // a < space.blocks.shape[1]).all()
    assert set(space.split.tolist()) <= {0, 1, 2}


def _user_vocab(tmp_path, source, *, smiles=None, smarts=None):
    folder = tmp_path / "vocab"
    shutil.copytree(source, folder)
    if smiles is not None:
        blocks = json.loads((folder / "building_blocks.json").read_text())
        blocks = {(smiles if i == 5 else s): c for i, (s, c) in enumerate(blocks.items())}
        (folder / "building_blocks.json").write_text(json.dumps(blocks))
    if smarts is not None:
        rxns = json.loads((folder / "reactions.json").read_text())
        rxns = {(smarts if i == 3 else s): v for i, (s, v) in enumerate(rxns.items())}
        (folder / "reactions.json").write_text(json.dumps(rxns))
    return folder


@pytest.mark.parametrize("bad", ["C1CC(", "Xx", ""])
def test_invalid_smiles_names_the_entry(syncogen_vocab_dir, tmp_path, bad):
    folder = _user_vocab(tmp_path, syncogen_vocab_dir, smiles=bad)
    with pytest.raises(ValueError, match=r"building_blocks.json: entry 5 .*not a valid SMILES"):
        load_vocabulary(folder)


@pytest.mark.parametrize("bad", ["[c:1]-[Br].[c:2]-[B]>>", "[c:1-[Br].[c:2]-[B]>>[c:1]-[c:2]", "CC>>CC"])
def test_invalid_smarts_names_the_entry(syncogen_vocab_dir, tmp_path, bad):
    folder = _user_vocab(tmp_path, syncogen_vocab_dir, smarts=bad)
    with pytest.raises(ValueError, match=r"reactions.json: entry 3 "):
        load_vocabulary(folder)


def test_bad_vocabulary_files(syncogen_vocab_dir, tmp_path):
    with pytest.raises(FileNotFoundError, match="not a folder"):
        load_vocabulary(tmp_path / "nope")
    folder = _user_vocab(tmp_path, syncogen_vocab_dir)
    (folder / "reactions.json").write_bytes(b"\x00\xff garbage")
    with pytest.raises(ValueError, match=r"reactions\.json: not valid JSON"):
        load_vocabulary(folder)
    shutil.copy(syncogen_vocab_dir / "reactions.json", folder / "reactions.json")
    (folder / "meta.json").unlink()
    with pytest.raises(FileNotFoundError, match=r"meta\.json"):
        load_vocabulary(folder)
