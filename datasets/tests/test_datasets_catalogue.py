"""The catalogue, data-root resolution and the toy generators."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

import flowlab.datasets as fd

DATA = os.environ.get("FLOWLAB_DATA")
needs_data = pytest.mark.skipif(
    not DATA or not Path(DATA).is_dir(), reason="FLOWLAB_DATA is not set to the shared datasets folder"
)


def test_catalogue_lists_every_shared_dataset_with_hashes():
    cat = fd.catalogue()
    assert {
        "earth_sphere",
        "single_cell",
        "alanine_dipeptide",
        "dw4_lj13",
        "crowds",
        "syncogen_vocabulary",
    } <= set(cat)
    for entry in cat.values():
        assert entry.files and entry.licence and entry.citation
        assert all(len(h) == 64 and int(h, 16) >= 0 for h in entry.files.values())


def test_root_unset_names_the_variable(monkeypatch):
    monkeypatch.delenv("FLOWLAB_DATA", raising=False)
    with pytest.raises(FileNotFoundError, match="FLOWLAB_DATA is not set"):
        fd.root()
    assert fd.root(required=False) is None


def test_missing_file_names_dataset_file_and_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("FLOWLAB_DATA", str(tmp_path))
    with pytest.raises(FileNotFoundError) as err:
        fd.path("earth_sphere", "volcano.csv")
    msg = str(err.value)
    assert "earth_sphere" in msg and "volcano.csv" in msg and "FLOWLAB_DATA" in msg


def test_check_detects_missing_and_corrupt_files(tmp_path):
    entry = fd.dataset("earth_sphere")
    folder = tmp_path / "earth_sphere"
    folder.mkdir()
    (folder / "volcano.csv").write_text("0,0\n")
    status = {c.file: c.status for c in fd.check("earth_sphere", tmp_path)}
    assert status["volcano.csv"] == "mismatch"
    assert status["flood.csv"] == "missing"
    assert set(status) == set(entry.files)


@needs_data
def test_shared_datasets_match_their_checksums():
    root = fd.root()
    bad = [(c.dataset, c.file, c.status) for name in fd.catalogue() for c in fd.check(name, root) if c.status != "ok"]
    assert not bad, bad


def test_unknown_dataset_is_a_value_error():
    with pytest.raises(ValueError, match="unknown data set"):
        fd.dataset("nope")


@pytest.mark.parametrize("name", fd.TOYS)
def test_toys_are_seeded_and_shaped(name):
    a = fd.sample_toy(name, 500, generator=torch.Generator().manual_seed(0))
    b = fd.sample_toy(name, 500, generator=torch.Generator().manual_seed(0))
    c = fd.sample_toy(name, 500, generator=torch.Generator().manual_seed(1))
    assert a.shape == (500, 2) and torch.isfinite(a).all()
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert a.abs().max() < 6 and a.std(0).min() > 0.3


def test_eight_gaussians_has_eight_modes():
    x = fd.sample_toy("eight_gaussians", 4000, generator=torch.Generator().manual_seed(0))
    angles = torch.atan2(x[:, 1], x[:, 0])
    k = torch.round(angles / (2 * torch.pi / 8)) % 8
    counts = torch.bincount(k.long(), minlength=8).float()
    # each mode ~ Binomial(4000, 1/8): mean 500, sd ~21; 5 sd bound
    assert ((counts - 500).abs() < 5 * 21).all()
    assert (x.norm(dim=1) - 2).abs().mean() < 0.3
