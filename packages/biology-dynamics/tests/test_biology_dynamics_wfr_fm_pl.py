"""The scanpy-style plots `pl.velocity_embedding`, `pl.growth` and `pl.trajectories`: what they draw (read back
from the artists), drawing into a given Axes, and the ValueErrors of bad input."""

from __future__ import annotations

import anndata as ad
import matplotlib
import numpy as np
import pytest
import torch

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.quiver import Quiver

from flowlab.biology_dynamics.wfr_fm import pl, tl
from flowlab.biology_dynamics.wfr_fm.model import WFRFlowMatching

COUNTS = (15, 25, 20)


@pytest.fixture(autouse=True)
def _one_thread_and_closed_figures():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
    plt.close("all")


def _adata() -> ad.AnnData:
    """60 cells at days 0, 1, 2 drifting right: obsm["X_emb"] (60, 2), a 1-D and a 3-D embedding, a cluster label."""
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal((k, 0.5 * k), 0.3, size=(m, 2)) for k, m in enumerate(COUNTS)])
    adata = ad.AnnData(X=X.astype(np.float32))
    adata.obs["day"] = np.repeat([0.0, 1.0, 2.0], COUNTS)
    adata.obs["cluster"] = np.where(X[:, 1] > 0.5, "up", "down")
    adata.obsm["X_emb"] = X.astype(np.float32)
    adata.obsm["X_line"] = X[:, :1].astype(np.float32)
    adata.obsm["X_umap"] = rng.normal(size=(adata.n_obs, 2))
    return adata


@pytest.fixture(scope="module")
def fitted() -> tl.CellsFit:
    torch.set_num_threads(1)
    return tl.fit(_adata(), time_key="day", use_rep="X_emb", delta=1.0, config="smoke")


def _quiver(ax: Axes) -> Quiver:
    (arrows,) = [c for c in ax.collections if isinstance(c, Quiver)]
    return arrows


def _coloured(ax: Axes) -> np.ndarray:
    (values,) = [c.get_array() for c in ax.collections if c.get_array() is not None and not isinstance(c, Quiver)]
    return np.asarray(values)


def test_velocity_embedding_draws_one_arrow_per_cell_with_its_stored_velocity(fitted):
    adata = fitted.adata
    ax = pl.velocity_embedding(adata, color="day")
    arrows = _quiver(ax)
    velocity = adata.obsm["velocity_wfr_fm"]
    assert isinstance(ax, Axes) and adata.n_obs == arrows.N
    np.testing.assert_allclose(arrows.U, velocity[:, 0], rtol=1e-6)
    np.testing.assert_allclose(arrows.V, velocity[:, 1], rtol=1e-6)
    np.testing.assert_allclose(arrows.get_offsets(), adata.obsm["X_emb"], rtol=1e-6)
    np.testing.assert_allclose(arrows.get_array(), adata.obs["day"])  # coloured by the numeric column
    assert len(ax.figure.axes) == 2  # and its colour bar


def test_velocity_embedding_colours_categories_with_scanpys_palette(fitted):
    adata = fitted.adata.copy()
    adata.uns["cluster_colors"] = ["#ff0000", "#0000ff"]  # down, up (sorted categories)
    ax = pl.velocity_embedding(adata, basis="emb", color="cluster")  # scanpy's short name for obsm["X_emb"]
    expected = np.where(adata.obs["cluster"] == "up", "#0000ff", "#ff0000")
    np.testing.assert_allclose(_quiver(ax).get_facecolors(), matplotlib.colors.to_rgba_array(expected))
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["down", "up"]


def test_velocity_embedding_skips_cells_outside_the_fitted_times(fitted):
    adata = fitted.adata.copy()
    adata.obs["day"] = np.where(adata.obs["day"] == 2.0, 5.0, adata.obs["day"])  # day 5 is past the fit
    tl.annotate(fitted.model, adata, time_key="day", use_rep="X_emb", key_added="late")
    finite = np.isfinite(adata.obsm["velocity_late"]).all(axis=1)
    assert finite.sum() == COUNTS[0] + COUNTS[1]
    arrows = _quiver(pl.velocity_embedding(adata, key="late"))
    assert finite.sum() == arrows.N
    np.testing.assert_allclose(arrows.U, adata.obsm["velocity_late"][finite, 0], rtol=1e-6)
    np.testing.assert_allclose(arrows.V, adata.obsm["velocity_late"][finite, 1], rtol=1e-6)
    ax = pl.growth(adata, key="late")
    np.testing.assert_allclose(_coloured(ax), adata.obs["growth_late"][finite], rtol=1e-6)


def test_velocity_embedding_of_a_3d_embedding_draws_its_first_two_axes():
    rng = np.random.default_rng(1)
    adata = ad.AnnData(X=np.zeros((10, 1), dtype=np.float32))
    adata.obsm["X_pca"] = rng.normal(size=(10, 3))
    velocity = rng.normal(size=(10, 3))
    velocity[3] = np.nan
    adata.obsm["velocity_k"], adata.uns["k"] = velocity, {"use_rep": "X_pca"}
    arrows = _quiver(pl.velocity_embedding(adata, key="k", use_rep="X_pca", scale=1.0))
    keep = np.arange(10) != 3
    np.testing.assert_allclose(arrows.get_offsets(), adata.obsm["X_pca"][keep, :2])
    np.testing.assert_allclose(np.c_[arrows.U, arrows.V], velocity[keep, :2])
    assert arrows.scale == 1.0 and arrows.scale_units == "xy"


def test_growth_colours_every_cell_by_its_growth_on_any_basis(fitted):
    adata = fitted.adata
    ax = pl.growth(adata, cmap="magma")
    assert isinstance(ax, Axes)
    np.testing.assert_allclose(_coloured(ax), adata.obs["growth_wfr_fm"], rtol=1e-6)
    (dots,) = [c for c in ax.collections if c.get_array() is not None]
    assert dots.get_cmap().name == "magma" and len(ax.figure.axes) == 2  # the colour bar
    np.testing.assert_allclose(dots.get_offsets(), adata.obsm["X_emb"], rtol=1e-6)
    np.testing.assert_allclose(pl.growth(adata, basis="umap").collections[0].get_offsets(), adata.obsm["X_umap"])


def test_trajectories_draws_one_path_per_particle_from_the_first_day(fitted):
    adata, model = fitted.adata, fitted.model
    ax = pl.trajectories(model, adata, time_key="day", n=7, n_times=5)
    lines = ax.get_lines()
    assert isinstance(ax, Axes) and len(lines) == 7
    assert all(len(line.get_xdata()) == 5 for line in lines)
    day0 = adata.obsm["X_emb"][adata.obs["day"] == 0.0]
    starts = np.array([(line.get_xdata()[0], line.get_ydata()[0]) for line in lines])
    assert np.abs(starts[:, None] - day0[None]).max(-1).min(1).max() < 1e-5  # each starts at a day-0 cell
    ends = np.array([(line.get_xdata()[-1], line.get_ydata()[-1]) for line in lines])
    assert not np.allclose(starts, ends)  # pushed by the model
    np.testing.assert_allclose(_coloured(ax), adata.obs["day"])  # the cells, by time
    assert len(pl.trajectories(model, adata, time_key="day", n=1000).get_lines()) == COUNTS[0]  # at most n0


def test_each_plot_draws_into_the_given_axes(fitted):
    adata = fitted.adata
    _, axes = plt.subplots(1, 3)
    assert pl.velocity_embedding(adata, ax=axes[0]) is axes[0]
    assert pl.growth(adata, ax=axes[1]) is axes[1]
    assert pl.trajectories(fitted.model, adata, time_key="day", n=3, ax=axes[2]) is axes[2]
    assert len(plt.get_fignums()) == 1 and all(ax.has_data() for ax in axes)


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda a, m: pl.velocity_embedding(a, key="missing"), "key: .*tl.fit\\(adata, ..., key_added='missing'\\)"),
        (lambda a, m: pl.velocity_embedding(a, basis="X_tsne"), "basis: .*keys \\['X_emb', 'X_line', 'X_umap'"),
        (lambda a, m: pl.velocity_embedding(a, basis="umap"), "basis: the velocities .* live in 'X_emb'"),
        (lambda a, m: pl.velocity_embedding(a, use_rep="X_line"), "use_rep: expected an embedding of at least 2"),
        (lambda a, m: pl.velocity_embedding(a, color="batch"), "color: 'batch' not in adata.obs"),
        (lambda a, m: pl.velocity_embedding(a.obsm["X_emb"]), "adata: expected an AnnData"),
        (lambda a, m: pl.velocity_embedding(a, ax="left"), "ax: expected a matplotlib Axes"),
        (lambda a, m: pl.growth(a, key="missing"), "key: adata.obs has no 'growth_missing'.*tl.fit"),
        (lambda a, m: pl.growth(a, use_rep="X_line"), "use_rep: expected an embedding of at least 2"),
        (lambda a, m: pl.growth(a, basis="tsne"), "basis: neither 'tsne' nor 'X_tsne'"),
        (lambda a, m: pl.trajectories(WFRFlowMatching(), a, time_key="day"), "model: expected a fitted"),
        (lambda a, m: pl.trajectories(m, a, time_key="day", use_rep="X_line"), "use_rep: expected an embedding"),
        (lambda a, m: pl.trajectories(m, a, time_key="day", use_rep="X_pca"), "use_rep: the model was fitted in 2"),
        (lambda a, m: pl.trajectories(m, a, time_key="hour"), "time_key: 'hour' not in adata.obs"),
        (lambda a, m: pl.trajectories(m, a[a.obs["day"] > 0], time_key="day"), "time_key: no cell .* first fitted"),
        (lambda a, m: pl.trajectories(m, a, time_key="day", n=0), "n: expected an integer number of particles"),
        (lambda a, m: pl.trajectories(m, a, time_key="day", n_times=1), "n_times: expected an integer"),
    ],
)
def test_bad_input_raises_a_value_error_naming_the_argument(fitted, call, argument):
    adata = fitted.adata.copy()
    adata.obsm["X_pca"] = np.zeros((adata.n_obs, 3))  # 3-D, unlike the fitted 2-D
    with pytest.raises(ValueError, match=f"^{argument}"):
        call(adata, fitted.model)
