"""Helpers shared by the molecular tests: finite differences, an independent dihedral, the alanine dipeptide data
root (tests that need it skip when it is absent) and a tiny SN2 variant."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from flowlab.datasets import root
from flowlab.molecular.wt_asbs.aldp import DATASET, INPCRD, PRMTOP


def _fd_grad(f, x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    out = torch.zeros_like(x)
    for j in range(x.shape[1]):
        e = torch.zeros_like(x)
        e[:, j] = eps
        out[:, j] = (f(x + e) - f(x - e)) / (2 * eps)
    return out


def _numpy_dihedral(p0, p1, p2, p3) -> float:
    """Praxeolitic formula, written independently of TorsionCV (degrees)."""
    b0, b1, b2 = p0 - p1, p2 - p1, p3 - p2
    b1 = b1 / np.linalg.norm(b1)
    v = b0 - np.dot(b0, b1) * b1
    w = b2 - np.dot(b2, b1) * b1
    return float(np.degrees(np.arctan2(np.dot(np.cross(b1, v), w), np.dot(v, w))))


@pytest.fixture
def fd_grad():
    """Central differences of f: (B, D) -> (B,) along each coordinate: (B, D)."""
    return _fd_grad


@pytest.fixture
def numpy_dihedral():
    return _numpy_dihedral


@pytest.fixture
def aldp_root() -> Path:
    """The data root holding the alanine_dipeptide data set; the test is skipped when it is absent."""
    data = root(required=False)
    if data is None or not all((data / DATASET / f).is_file() for f in (PRMTOP, INPCRD)):
        pytest.skip(f"alanine_dipeptide data set not found under FLOWLAB_DATA={data}")
    return data


@pytest.fixture
def tiny_sn2():
    """The quick SN2 variant at toy size: 2 walkers x 40 steps, an AC curriculum of 2 + 1 epochs of 2 steps."""
    from flowlab.molecular.wt_asbs.benchmarks.sn2 import SN2_QUICK

    asbs = replace(
        SN2_QUICK.sampler.asbs,
        stages="AC",
        adjoint_epochs=2,
        corrector_epochs=1,
        steps_per_epoch=2,
        new_samples=8,
        skip_epochs=0,
    )
    return replace(SN2_QUICK, sampler=replace(SN2_QUICK.sampler, asbs=asbs), walkers=2, md_steps=40, n_eval=16)


@pytest.fixture(scope="session")
def syncogen_vocab_dir() -> Path:
    """The syncogen_vocabulary folder; the test is skipped when FLOWLAB_DATA does not hold it."""
    data = root(required=False)
    folder = None if data is None else data / "syncogen_vocabulary"
    if folder is None or not (folder / "building_blocks.json").is_file():
        pytest.skip(f"syncogen_vocabulary data set not found under FLOWLAB_DATA={data}")
    return folder


@pytest.fixture(scope="session")
def syncogen_tiny(syncogen_vocab_dir, tmp_path_factory):
    """(vocabulary, a 40-molecule mini SynSpace built in one process into a private artifact cache, cache folder)."""
    from flowlab.molecular.syncogen.space import SpaceConfig, load_space
    from flowlab.molecular.syncogen.vocabulary import load_vocabulary

    cache = tmp_path_factory.mktemp("syncogen_cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FLOWLAB_CACHE", str(cache))
        space = load_space(SpaceConfig(n_molecules=40, workers=1), vocab_folder=syncogen_vocab_dir)
    return load_vocabulary(syncogen_vocab_dir), space, cache
