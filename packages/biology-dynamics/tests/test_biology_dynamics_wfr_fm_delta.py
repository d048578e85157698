"""delta from the data: the median displacement of a known translation, the held-out selection, the settings the CLI
and `tl.fit` take."""

from __future__ import annotations

import anndata as ad
import numpy as np
import pytest
from typer.testing import CliRunner

from flowlab.biology_dynamics.cli import cells_app
from flowlab.biology_dynamics.wfr_fm.data import time_series_from_adata
from flowlab.biology_dynamics.wfr_fm.delta import (
    DATA_POSITION,
    data_delta,
    delta_candidates,
    displacement_quantiles,
    parse_delta,
    select_delta,
)
from flowlab.biology_dynamics.wfr_fm.model import WFRConfig
from flowlab.biology_dynamics.wfr_fm.presets import sized
from flowlab.biology_dynamics.wfr_fm.registry import load_model
from flowlab.biology_dynamics.wfr_fm.tl import fit


def _course(shift: float, n: tuple[int, ...] = (120, 180), seed: int = 0) -> ad.AnnData:
    """Tight clouds (std 0.01) moving by `shift` along the first axis per unit time, growing in count."""
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.normal(0, 0.01, size=(m, 3)) + np.array([k * shift, 0, 0]) for k, m in enumerate(n)])
    adata = ad.AnnData(X=x.astype(np.float32))
    adata.obs["time"] = np.repeat(np.arange(len(n), dtype=float), n)
    adata.obsm["X_emb"] = adata.X
    return adata


def test_candidates_span_the_distance_cells_move():
    """A cloud translated by 0.8 (and by 2.5): every OT pair moves the shift to within the clouds' spread (0.01 per
    axis: under 0.03), so the median and the 99th-percentile moves are the shift to 4 %, the candidates run from half
    of it to it, and data_delta is the fourth: the shift * 2^(-1/4)."""
    for shift in (0.8, 2.5):
        series = time_series_from_adata(_course(shift, n=(120, 180, 150)))
        d50, d99 = displacement_quantiles(series, (0.5, 0.99))
        assert d50 == pytest.approx(shift, rel=0.04) and d99 == pytest.approx(shift, rel=0.04)
        candidates = delta_candidates(series)
        np.testing.assert_allclose(candidates, np.geomspace(d50 / 2, d99, 5), rtol=1e-12)
        assert data_delta(series) == candidates[DATA_POSITION] == pytest.approx(shift * 2**-0.25, rel=0.05)


def test_candidates_reach_the_far_movers():
    """Most cells stay (moves of 0.01), a tenth jump by 2: the median move is tiny but the candidates reach 2, so a
    growth-only delta is never the default (the gene data's failure with the median rule)."""
    rng = np.random.default_rng(1)
    x0 = rng.normal(0, 0.01, size=(200, 2))
    x1 = x0 + rng.normal(0, 0.01, size=(200, 2))
    x1[:20, 0] += 2.0
    adata = ad.AnnData(X=np.concatenate([x0, x1]).astype(np.float32))
    adata.obs["time"] = np.repeat([0.0, 1.0], 200)
    adata.obsm["X_emb"] = adata.X
    candidates = delta_candidates(time_series_from_adata(adata))
    assert candidates[0] < 0.05 and candidates[-1] == pytest.approx(2.0, rel=0.05)
    assert data_delta(time_series_from_adata(adata)) > 0.3


def test_data_delta_refuses_cells_that_do_not_move():
    adata = _course(0.0, n=(50, 50))
    adata.obsm["X_emb"][50:] = adata.obsm["X_emb"][:50]
    with pytest.raises(ValueError, match=r"^delta: the cells do not move"):
        data_delta(time_series_from_adata(adata))
    with pytest.raises(ValueError, match=r"^delta: the cells do not move"):
        select_delta(adata, sized(WFRConfig(), "smoke"))


def test_parse_delta_takes_numbers_and_the_named_settings():
    assert parse_delta("1.5") == 1.5 and parse_delta(2) == 2.0
    assert parse_delta("data") == "data" and parse_delta("auto") == "auto"
    for bad in ("wide", "0", "-1", "nan", "inf"):
        with pytest.raises(ValueError, match=r"^delta: expected a positive length scale"):
            parse_delta(bad)


def test_select_delta_scores_every_candidate_on_held_out_cells_and_keeps_the_best():
    adata = _course(0.8)
    chosen = select_delta(adata, sized(WFRConfig(), "smoke"), count=2, seed=0)
    assert len(chosen.scores) == 2 and chosen.delta == min(chosen.scores, key=chosen.scores.get)
    low, high = sorted(chosen.scores)
    assert low == pytest.approx(0.4, rel=0.05) and high == pytest.approx(0.8, rel=0.05)  # from 80 % of the cells
    assert all(np.isfinite(v) and v > 0 for v in chosen.scores.values())
    with pytest.raises(ValueError, match=r"^held_out: time 0 has 3 cells"):
        select_delta(_course(0.8, n=(3, 40)), sized(WFRConfig(), "smoke"))


def test_cli_and_tl_fit_take_delta_from_the_data_by_default(tmp_path):
    adata = _course(0.8)
    path = tmp_path / "course.h5ad"
    adata.write_h5ad(path)
    expected = data_delta(time_series_from_adata(adata))
    res = CliRunner().invoke(cells_app, ["fit", str(path), "--config", "smoke", "--out", str(tmp_path / "m")])
    assert res.exit_code == 0 and f"delta = {expected:.4g} (data)" in res.output, res.output
    assert load_model(tmp_path / "m").config.delta == expected
    result = fit(adata.copy(), config="smoke", seed=0)
    assert result.model.config.delta == expected
    res = CliRunner().invoke(cells_app, ["fit", str(path), "--config", "smoke", "--delta", "auto",
                                         "--out", str(tmp_path / "auto")])  # fmt: skip
    assert res.exit_code == 0 and "delta auto: held-out mean W1 by delta" in res.output, res.output
