"""The size presets are the benchmarks' variants, and `flowlab cells fit --config P` trains the bench's P model: the
same config and, from the same data and seed, the same weights bit for bit."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from flowlab.biology_dynamics.cli import cells_app
from flowlab.biology_dynamics.wfr_fm.benchmarks import dygen, emt, gene
from flowlab.biology_dynamics.wfr_fm.data import read_time_series_csv, subsample_cells
from flowlab.biology_dynamics.wfr_fm.model import WFRConfig, WFRFlowMatching
from flowlab.biology_dynamics.wfr_fm.neural_ode_growth import NeuralODEConfig
from flowlab.biology_dynamics.wfr_fm.ot_cfm import OTCFMConfig
from flowlab.biology_dynamics.wfr_fm.presets import sized
from flowlab.biology_dynamics.wfr_fm.registry import load_model
from flowlab.biology_dynamics.wfr_fm.uot_cfm import UOTCFMConfig

DATA = os.environ.get("FLOWLAB_DATA")
needs_data = pytest.mark.skipif(not DATA, reason="FLOWLAB_DATA is not set (single_cell/dygen.csv)")


@pytest.mark.parametrize("module", [gene, emt, dygen], ids=["gene", "emt", "dygen"])
@pytest.mark.parametrize("preset", ["smoke", "quick"])
def test_every_benchmark_variant_is_its_preset(module, preset):
    """A scenario's quick and smoke configs are the presets with the data set's delta, for every method."""
    variant = getattr(module, preset.upper())
    delta = variant.wfr.delta
    assert sized(WFRConfig(delta=delta), preset) == variant.wfr
    assert sized(OTCFMConfig(), preset) == variant.ot_cfm
    assert sized(UOTCFMConfig(delta=delta), preset) == variant.uot_cfm
    assert sized(NeuralODEConfig(), preset) == variant.neural_ode_rk4
    assert sized(NeuralODEConfig(solver="dopri5", adjoint=True), preset) == variant.neural_ode


def test_preset_overrides_and_errors():
    cfg = sized(WFRConfig(), "quick", iters=7, v_hidden=(8, 8), batch=None)
    assert (cfg.iters, cfg.v_hidden, cfg.batch, cfg.plan_iters) == (7, (8, 8), 128, 300)
    assert sized(WFRConfig(), None) == WFRConfig()
    with pytest.raises(ValueError, match=r"^config: expected one of"):
        sized(WFRConfig(), "huge")
    with pytest.raises(ValueError, match=r"^plan_iters: OTCFMConfig has no such setting"):
        sized(OTCFMConfig(), "quick", plan_iters=10)
    with pytest.raises(ValueError, match=r"^iters:"):
        sized(WFRConfig(), "quick", iters=0)


def _cli_against_bench(tmp_path: Path, preset: str, fraction: float) -> None:
    variant = getattr(dygen, preset.upper())
    adata = subsample_cells(read_time_series_csv(Path(DATA) / "single_cell" / "dygen.csv"), fraction, seed=0)
    adata.write_h5ad(tmp_path / "dygen.h5ad")
    args = ["fit", str(tmp_path / "dygen.h5ad"), "--config", preset, "--delta", str(variant.wfr.delta),
            "--out", str(tmp_path / "cli")]  # fmt: skip
    res = CliRunner().invoke(cells_app, args)
    assert res.exit_code == 0, res.output
    cli = load_model(tmp_path / "cli")
    bench = WFRFlowMatching(variant.wfr).fit(adata, generator=torch.Generator().manual_seed(0))  # seed 0's WFR-FM
    assert cli.config == variant.wfr
    for (name, a), b in zip(cli.fields.state_dict().items(), bench.fields.state_dict().values(), strict=True):
        assert torch.equal(a, b), name


@needs_data
@pytest.mark.parametrize("preset", ["smoke", pytest.param("quick", marks=pytest.mark.slow)])
def test_cells_fit_config_trains_the_bench_model(tmp_path, preset):
    """`cells fit dygen --config P --delta 2` and the `bio.wfr_fm.dygen` P scenario's WFR-FM (seed 0, one thread as
    the scenario runs) end with the same config and weights (quick: about 30 s, so `slow`; the default run checks
    the same path on the smoke preset)."""
    torch.set_num_threads(1)
    _cli_against_bench(tmp_path, preset, getattr(dygen, preset.upper()).cell_fraction)
