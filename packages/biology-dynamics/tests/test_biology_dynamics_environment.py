"""The single-cell stack (AnnData, scanpy's shipped data, POT) works offline."""

from __future__ import annotations

import numpy as np
import ot
import pytest

from flowlab.datasets import root

ROOT = root(required=False)
DATA = None if ROOT is None else ROOT / "single_cell"


def test_scanpy_ships_pbmc68k_reduced_offline():
    import scanpy as sc

    adata = sc.datasets.pbmc68k_reduced()
    assert adata.n_obs == 700 and "X_pca" in adata.obsm and "bulk_labels" in adata.obs


def test_pot_unbalanced_plan_respects_marginals_as_penalty_grows():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(30, 2)), rng.normal(size=(40, 2)) + 1
    a, b = np.full(30, 1 / 30), np.full(40, 2 / 40)  # unequal total mass
    cost = ot.dist(x, y)
    cost /= cost.max()
    plan = ot.unbalanced.mm_unbalanced(a, b, cost, reg_m=1e3, div="kl")
    assert plan.sum() == pytest.approx(np.sqrt(a.sum() * b.sum()), rel=0.05)  # KL-balanced total mass


@pytest.mark.skipif(DATA is None or not DATA.is_dir(), reason=f"single_cell data set not found under {DATA}")
def test_emt_time_series_has_four_time_points():
    import pandas as pd

    frame = pd.read_csv(DATA / "emt.csv")
    assert list(frame.columns) == ["samples", *(f"x{i}" for i in range(1, 11))]
    assert sorted(frame["samples"].unique()) == [0, 1, 2, 3]
