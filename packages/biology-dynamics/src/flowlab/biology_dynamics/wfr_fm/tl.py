"""scanpy-style entry point: `fit(adata, time_key=..., use_rep=...)` learns WFR-FM and writes its fields back."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import anndata as ad
import numpy as np
import torch

from flowlab.biology_dynamics.wfr_fm.data import embedding, obs_times
from flowlab.biology_dynamics.wfr_fm.delta import resolve_delta
from flowlab.biology_dynamics.wfr_fm.model import TimeCourseModel, WFRConfig, WFRFlowMatching
from flowlab.biology_dynamics.wfr_fm.presets import sized

__all__ = ["CellsFit", "annotate", "fit"]


@dataclass(frozen=True)
class CellsFit:
    """The annotated AnnData (the input, or its copy with copy=True) and the fitted model."""

    adata: ad.AnnData
    model: TimeCourseModel


def annotate(model: TimeCourseModel, adata: ad.AnnData, *, time_key: str, use_rep: str, key_added: str) -> None:
    """Write v(t, x) to obsm[f"velocity_{key_added}"], g(t, x) to obs[f"growth_{key_added}"] (each cell at its
    own time, in data time units; NaN for cells outside the fitted time range) and the settings to uns[key_added]."""
    _, st = model._require_fit()
    X, t = embedding(adata, use_rep), obs_times(adata, time_key)
    velocity = np.full(X.shape, np.nan, dtype=np.float32)
    growth = np.full(X.shape[0], np.nan, dtype=np.float32)
    for value in np.unique(t):
        if st.times[0] <= value <= st.times[-1]:
            rows = t == value
            velocity[rows] = model.velocity(X[rows], float(value))
            growth[rows] = model.growth(X[rows], float(value))
    adata.obsm[f"velocity_{key_added}"] = velocity
    adata.obs[f"growth_{key_added}"] = growth
    meta = model._meta()
    adata.uns[key_added] = {
        "method": meta["method"],
        "params": {k: v for k, v in model.config.to_dict().items() if v is not None},
        "times": list(meta["times"]),
        "time_key": time_key,
        "use_rep": use_rep,
        "train_seconds": float(meta["train_seconds"]),
    }


def fit(
    adata: ad.AnnData,
    *,
    time_key: str = "time",
    use_rep: str = "X_emb",
    delta: float | str = "data",
    config: str | None = None,
    key_added: str = "wfr_fm",
    copy: bool = False,
    hold_out: float | None = None,
    device: torch.device | str = "cpu",
    seed: int = 0,
    **options: Any,
) -> CellsFit:
    """Fit WFR-FM to the cells of `adata` (times in obs[time_key], embedding in obsm[use_rep]) and annotate it
    (see `annotate`). `delta`: a number, "data" (`delta.data_delta`: the median distance a cell moves between
    consecutive times) or "auto" (`delta.select_delta`: picked on held-out cells). `config`: a size preset of
    `presets` ("smoke", "quick", "full": the benchmarks' variants); `options` are further `WFRConfig` fields (iters,
    batch, v_hidden, ...), which override it."""
    target = adata.copy() if copy else adata
    settings = sized(WFRConfig(), config, **options)
    value, _ = resolve_delta(delta, target, settings, time_key=time_key, use_rep=use_rep, hold_out=hold_out,
                             seed=seed, device=device)  # fmt: skip
    model = WFRFlowMatching(replace(settings, delta=value))
    model.fit(
        target,
        time_key=time_key,
        use_rep=use_rep,
        hold_out=hold_out,
        device=device,
        generator=torch.Generator(device).manual_seed(seed),
    )
    annotate(model, target, time_key=time_key, use_rep=use_rep, key_added=key_added)
    return CellsFit(adata=target, model=model)
