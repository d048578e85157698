"""Velocity and growth fields, and the time-course models that fit them to an AnnData.

All models work in normalised time τ = (t − t_first) / (t_last − t_first) in [0, 1] (the core's convention);
`velocity` and `growth` report rates per unit of the data's own time.
"""

from __future__ import annotations

import json
import math
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import anndata as ad
import numpy as np
import pandas as pd
import torch
from torch import nn

from flowlab.biology_dynamics.wfr_fm.data import TimeSeries, embedding, fit_series
from flowlab.biology_dynamics.wfr_fm.names import METHODS, PLAN_SOLVERS
from flowlab.biology_dynamics.wfr_fm.objective import WFRSampler, train_matching, unbalanced_plans
from flowlab.biology_dynamics.wfr_fm.sample import ParticleTrajectory, simulate_particles
from flowlab.core.config import Config
from flowlab.core.nets import TimeMLP, seeded_init
from flowlab.core.train import load_checkpoint, save_checkpoint

__all__ = [
    "GrowthFields",
    "MatchingModel",
    "TimeCourseModel",
    "WFRConfig",
    "WFRFlowMatching",
    "check_training_fields",
    "checkpoint_meta",
]


class GrowthFields(nn.Module):
    """A velocity field v(τ, x): (B, d) and, with `growth=True`, a scalar growth rate g(τ, x): (B,).

    `forward(x=, t=)` is the velocity (a core VectorField); `growth(x=, t=)` is zero when growth=False.
    """

    def __init__(
        self,
        dim: int,
        *,
        v_hidden: Sequence[int] = (256,) * 5,
        g_hidden: Sequence[int] = (256,) * 3,
        growth: bool = True,
        act: str = "tanh",
        time_embed_dim: int = 32,
        time_scale: float = 30.0,
    ) -> None:
        super().__init__()
        opts = {"act": act, "time_embed_dim": time_embed_dim, "time_scale": time_scale}
        self.dim = dim
        self.v = TimeMLP(dim, hidden=tuple(v_hidden), **opts)
        self.g = TimeMLP(dim, hidden=tuple(g_hidden), out_dim=1, **opts) if growth else None

    def forward(self, *, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """The velocity v(τ, x): x: (B, d), t: (B,) -> (B, d)."""
        return self.v(x=x, t=t)

    def growth(self, *, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """The growth rate g(τ, x): x: (B, d), t: (B,) -> (B,); zeros when the fields have no growth network."""
        if self.g is None:
            return torch.zeros(x.shape[0], dtype=x.dtype, device=x.device)
        return self.g(x=x, t=t)[:, 0]


def _as_points(X: Any, dim: int | None, name: str = "X") -> np.ndarray:
    arr = X.detach().cpu().numpy() if isinstance(X, torch.Tensor) else np.asarray(X, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(f"{name}: expected an (n, d) array, got shape {arr.shape}")
    if dim is not None and arr.shape[1] != dim:
        raise ValueError(f"{name}: expected dimension {dim} (the fitted embedding), got {arr.shape[1]}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name}: holds NaN/inf values")
    return arr


@dataclass
class FitState:
    """What a fit learned about the data: the fitted times, their counts, the time normalisation and timings."""

    times: tuple[float, ...]
    counts: tuple[int, ...]
    dim: int
    hold_out: float | None = None
    train_seconds: float = float("nan")
    history: list[dict[str, float]] = field(default_factory=list)

    @property
    def t0(self) -> float:
        return self.times[0]

    @property
    def span(self) -> float:
        return self.times[-1] - self.times[0]


class TimeCourseModel(ABC):
    """A model of a growing, moving population fitted to cells observed at a few times.

    Subclasses set `method`, the `Config` subclass `config_cls`, build their fields in `_build` and train them in
    `_train`. After `fit`, `fields` holds the trained (EMA) networks and `state` the fitted times.
    """

    method: ClassVar[str]
    config_cls: ClassVar[type[Config]]

    def __init__(self, config: Config | None = None, **kwargs: Any) -> None:
        if config is None:
            config = self.config_cls(**kwargs)
        elif kwargs:
            raise ValueError(f"config: give a config or keyword options, not both (got {sorted(kwargs)})")
        if not isinstance(config, self.config_cls):
            raise ValueError(f"config: expected a {self.config_cls.__name__}, got {type(config).__name__}")
        self.config = config
        self.fields: GrowthFields | None = None
        self.state: FitState | None = None
        #: unbalanced plans to use instead of solving them in `fit` (plan-based methods; same data and delta)
        self.reuse_plans = None

    # -- fitting -------------------------------------------------------------------------------------------
    def fit(
        self,
        adata: ad.AnnData,
        *,
        time_key: str = "time",
        use_rep: str = "X_emb",
        hold_out: float | None = None,
        device: torch.device | str = "cpu",
        generator: torch.Generator | None = None,
        callbacks: Sequence[Callable[[Any], None]] = (),
        progress: bool = False,
    ) -> TimeCourseModel:
        """Fit to the cells of `adata` (times in obs[time_key], embedding in obsm[use_rep]); `hold_out`: one
        interior time point left out of training. Returns self."""
        series = fit_series(adata, time_key=time_key, use_rep=use_rep, hold_out=hold_out)
        if self.fields is not None and self.state is not None and series.dim != self.state.dim:
            raise ValueError(f"use_rep: dimension {series.dim} does not match the model's {self.state.dim}")
        device = torch.device(device)
        if generator is None:
            generator = torch.Generator(device).manual_seed(0)
        self.state = FitState(times=series.times, counts=series.counts, dim=series.dim, hold_out=hold_out)
        with seeded_init(generator):  # the fields' initialisation depends on `generator` alone
            self.fields = self._build(series.dim).to(device)
        self._train(series, device=device, generator=generator, callbacks=callbacks, progress=progress)
        self.fields.eval()
        return self

    #: whether the model learns a growth field (its config then has `g_hidden`)
    learns_growth: ClassVar[bool] = True

    def _build(self, dim: int) -> GrowthFields:
        c = self.config
        return GrowthFields(
            dim,
            v_hidden=c.v_hidden,
            g_hidden=c.g_hidden if self.learns_growth else (),
            act=c.act,
            growth=self.learns_growth,
            time_scale=c.time_scale,
            time_embed_dim=c.time_embed_dim,
        )

    @abstractmethod
    def _train(self, series: TimeSeries, *, device, generator, callbacks, progress) -> None: ...

    # -- time ----------------------------------------------------------------------------------------------
    def _require_fit(self) -> tuple[GrowthFields, FitState]:
        if self.fields is None or self.state is None:
            raise ValueError(f"{type(self).__name__}: not fitted yet; call fit(adata, ...) first")
        return self.fields, self.state

    def tau(self, t: float | Sequence[float] | np.ndarray, name: str = "t") -> np.ndarray:
        """Normalised times τ = (t − t_first) / span for data times t (checked to lie in the fitted range; an
        error names the times `name`)."""
        _, st = self._require_fit()
        t = np.atleast_1d(np.asarray(t, dtype=np.float64))
        tau = (t - st.t0) / st.span
        if not np.isfinite(tau).all() or (tau < -1e-9).any() or (tau > 1 + 1e-9).any():
            raise ValueError(
                f"{name}: expected times in the fitted range [{st.times[0]}, {st.times[-1]}], got {t.tolist()}"
            )
        return tau.clip(0, 1)

    def _device(self) -> torch.device:
        fields, _ = self._require_fit()
        return next(fields.parameters()).device

    # -- fields in data units ------------------------------------------------------------------------------
    def velocity(self, X: Any, t: float) -> np.ndarray:
        """v(t, x) per unit of data time at the points X: (n, d) -> (n, d)."""
        fields, st = self._require_fit()
        x = torch.as_tensor(_as_points(X, st.dim), dtype=torch.float32, device=self._device())
        tt = torch.full((x.shape[0],), float(self.tau(t)[0]), device=x.device)
        with torch.inference_mode():
            return (fields(x=x, t=tt) / st.span).cpu().numpy()

    def growth(self, X: Any, t: float | np.ndarray) -> np.ndarray:
        """g(t, x) per unit of data time at the points X: (n, d) -> (n,); t a number or one time per point."""
        fields, st = self._require_fit()
        x = torch.as_tensor(_as_points(X, st.dim), dtype=torch.float32, device=self._device())
        tau = self.tau(t)
        tt = torch.as_tensor(np.broadcast_to(tau, (x.shape[0],)).copy(), dtype=torch.float32, device=x.device)
        with torch.inference_mode():
            return (fields.growth(x=x, t=tt) / st.span).cpu().numpy()

    # -- simulation ----------------------------------------------------------------------------------------
    def simulate_points(
        self, X0: Any, *, t_from: float | None = None, times: Sequence[float] | None = None, method: str = "dopri5"
    ) -> ParticleTrajectory:
        """Particles from X0: (n, d) at t_from (default: the first fitted time) with log-weight 0, reported at
        `times` (default: every fitted time and the held-out one, from t_from on); tau is in normalised time."""
        fields, st = self._require_fit()
        t_from = st.times[0] if t_from is None else float(t_from)
        if times is None:
            all_times = sorted({*st.times, *(() if st.hold_out is None else (st.hold_out,))})
            times = [t for t in all_times if t >= t_from]
        times = sorted({t_from, *map(float, times)})
        if times[0] < t_from:
            raise ValueError(f"times: expected times >= t_from = {t_from}, got {times[0]}")
        tau = self.tau(times, "times")
        x = torch.as_tensor(_as_points(X0, st.dim, "X0"), dtype=torch.float32, device=self._device())
        if len(tau) == 1:
            z = torch.zeros(1, x.shape[0], device=x.device)
            return ParticleTrajectory(tau=torch.as_tensor(tau, device=x.device), x=x[None], log_w=z, nfe=0)
        with torch.inference_mode():
            return simulate_particles(fields, x, tau, method=method)

    def simulate(
        self,
        adata_or_X: ad.AnnData | Any,
        *,
        t_from: float | None = None,
        times: Sequence[float] | None = None,
        time_key: str = "time",
        use_rep: str = "X_emb",
    ) -> ad.AnnData:
        """Push cells forward: the cells of `adata_or_X` at time t_from (an AnnData: those with obs[time_key] ==
        t_from, default the first fitted time; an array: all rows) -> AnnData with one row per particle and
        time: obsm[use_rep] positions, obs["time"], obs["weight"] (mass, 1 at t_from), obs["log_weight"],
        obs["cell"] (the starting cell's obs name)."""
        _, st = self._require_fit()
        t_from = st.times[0] if t_from is None else float(t_from)
        if isinstance(adata_or_X, ad.AnnData):
            rep = embedding(adata_or_X, use_rep)
            if time_key not in adata_or_X.obs:
                raise ValueError(f"time_key: {time_key!r} not in adata.obs")
            mask = np.isclose(np.asarray(adata_or_X.obs[time_key], dtype=np.float64), t_from)
            if not mask.any():
                raise ValueError(f"t_from: no cells with obs[{time_key!r}] == {t_from}")
            X0, names = rep[mask], np.asarray(adata_or_X.obs_names[mask])
        else:
            X0 = _as_points(adata_or_X, st.dim, "adata_or_X")
            names = np.array([f"cell{i}" for i in range(X0.shape[0])])
        traj = self.simulate_points(X0, t_from=t_from, times=times)
        K, n = traj.log_w.shape
        t_real = st.t0 + traj.tau.cpu().numpy() * st.span
        log_w = traj.log_w.cpu().numpy().reshape(-1)
        obs = pd.DataFrame(
            {
                "time": np.repeat(t_real, n),
                "weight": np.exp(log_w),
                "log_weight": log_w,
                "cell": np.tile(names, K),
            },
            index=[f"{c}@{t:g}" for t in t_real for c in names],
        )
        pos = traj.x.cpu().numpy().reshape(K * n, -1).astype(np.float32)
        out = ad.AnnData(X=pos, obs=obs)
        out.obsm[use_rep] = pos.copy()
        out.uns["simulation"] = {"method": self.method, "t_from": t_from, "times": t_real.tolist()}
        return out

    # -- persistence ---------------------------------------------------------------------------------------
    def _meta(self) -> dict[str, Any]:
        _, st = self._require_fit()
        return {
            "method": self.method,
            "config": self.config.to_dict(),
            "times": list(st.times),
            "counts": list(st.counts),
            "dim": st.dim,
            "hold_out": st.hold_out,
            "train_seconds": st.train_seconds,
        }

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write a core checkpoint folder (tensors + JSON config) under `path`; returns the folder."""
        fields, _ = self._require_fit()
        meta = self._meta()
        return save_checkpoint(
            path, model=fields, step=self.config.iters, samples_seen=0, model_kwargs={"dim": meta["dim"]}, config=meta
        )

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, device: torch.device | str = "cpu") -> TimeCourseModel:
        """Rebuild a model of this class saved with `save` (the folder or its parent); `registry.load_model` reads
        the method from the checkpoint and picks the class."""
        folder, meta = checkpoint_meta(path)
        if meta["method"] != getattr(cls, "method", None):
            raise ValueError(
                f"path: {folder} holds a {meta['method']!r} model, not a {cls.__name__}; load it with load_model"
            )
        model = cls(cls.config_cls.from_mapping(meta["config"]))
        model.state = FitState(
            times=tuple(meta["times"]),
            counts=tuple(meta["counts"]),
            dim=int(meta["dim"]),
            hold_out=meta["hold_out"],
            train_seconds=float(meta.get("train_seconds", math.nan)),
        )
        model.fields = model._build(model.state.dim).to(device)
        load_checkpoint(folder, model=model.fields, device=device, restore_rng=False)  # another net's: ValueError
        model.fields.eval()
        return model


def checkpoint_meta(path: str | os.PathLike[str]) -> tuple[Path, dict[str, Any]]:
    """The checkpoint folder written by `TimeCourseModel.save` under `path` (the folder or its parent) and the
    model's metadata (method, config, fitted times and counts, dim, hold_out, train_seconds)."""
    folder = Path(path)
    cfg_file = next(iter(sorted(folder.glob("step-*/config.json"))), None) or folder / "config.json"
    if not cfg_file.is_file():
        raise FileNotFoundError(f"path: no FlowLab checkpoint (config.json) under {folder}")
    try:
        meta = json.loads(cfg_file.read_text())["config"]
    except (ValueError, KeyError, TypeError) as err:  # not JSON, or not a checkpoint's
        raise ValueError(f"path: {cfg_file} is not a FlowLab checkpoint's config.json ({err!r})") from None
    if not isinstance(meta, dict) or meta.get("method") not in METHODS:
        raise ValueError(f"path: {folder} holds no time-course model (none of {METHODS}); fit one with `flowlab "
                         "cells fit`")  # fmt: skip
    return cfg_file.parent, meta


def check_training_fields(cfg: Config) -> None:
    """Range checks shared by the time-course models' configs (types are checked by `Config`): positive
    iters, batch and plan iterations (where the config has them) and chunk (or None), a known plan solver and a
    positive plan ε, positive finite learning rates, an EMA decay in [0, 1) or None, non-empty positive widths."""
    for name in ("iters", "batch", "plan_iters", "chunk"):
        value = getattr(cfg, name, 1)
        if value is not None and value < 1:
            raise ValueError(f"{name}: expected a positive integer, got {value!r}")
    for name in ("lr", "lr_min"):
        value = getattr(cfg, name)
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"{name}: expected a positive learning rate, got {value!r}")
    if cfg.ema is not None and not (0 <= cfg.ema < 1):
        raise ValueError(f"ema: expected a decay in [0, 1) or None, got {cfg.ema!r}")
    if getattr(cfg, "plan_solver", "mm") not in PLAN_SOLVERS:
        raise ValueError(f"plan_solver: expected one of {PLAN_SOLVERS}, got {cfg.plan_solver!r}")
    plan_eps = getattr(cfg, "plan_eps", 1.0)
    if not (math.isfinite(plan_eps) and plan_eps > 0):
        raise ValueError(f"plan_eps: expected a positive entropic target, got {plan_eps!r}")
    for name in ("v_hidden", "g_hidden"):
        hidden = getattr(cfg, name, (1,))
        if not hidden or not all(h > 0 for h in hidden):
            raise ValueError(f"{name}: expected a non-empty sequence of positive widths, got {hidden!r}")


@dataclass(frozen=True)
class WFRConfig(Config):
    """WFR-FM settings (defaults: the reference code's). batch: pairs per interval per step; reg_m: the KL
    marginal penalty of the unbalanced plan; chunk: block size of a block-diagonal plan (None: one solve);
    plan_iters: majorisation-minimisation steps of the plan solve; plan_solver: "mm" (the reference code's solve,
    `plan_iters` dense steps) or "sinkhorn" (the core's `unbalanced_sinkhorn_kl` down to ε = plan_eps: several
    times faster on thousands of cells per time and closer to the optimum, RESULTS.md "Plan solve at scale");
    sigma: travelling-Gaussian width around the geodesic (0 in the released code)."""

    delta: float = 2.0
    sigma: float = 0.0
    v_hidden: tuple[int, ...] = (256,) * 5
    g_hidden: tuple[int, ...] = (256,) * 3
    act: str = "tanh"
    time_scale: float = 30.0
    time_embed_dim: int = 32
    iters: int = 3000
    batch: int = 512
    lr: float = 5e-3
    lr_min: float = 1e-5
    ema: float | None = 0.995
    reg_m: float = 1.0
    chunk: int | None = None
    plan_iters: int = 1000
    plan_solver: str = "mm"
    plan_eps: float = 3e-4

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.delta > 0:
            raise ValueError(f"delta: expected a positive length scale, got {self.delta!r}")
        if not self.sigma >= 0:
            raise ValueError(f"sigma: expected a non-negative width, got {self.sigma!r}")
        if not self.reg_m > 0:
            raise ValueError(f"reg_m: expected a positive marginal penalty, got {self.reg_m!r}")
        check_training_fields(self)


class MatchingModel(TimeCourseModel):
    """A time-course model trained by simulation-free regression on (x_t, target) pairs from `_sampler`."""

    @abstractmethod
    def _sampler(self, series: TimeSeries, *, device, generator) -> Any:
        """The pair sampler handed to `train_matching` (plans are solved here, before training starts)."""

    def _train(self, series, *, device, generator, callbacks, progress) -> None:
        c = self.config
        start = time.perf_counter()
        sampler = self._sampler(series, device=device, generator=generator)
        self.result = train_matching(
            self.fields,
            sampler,
            iters=c.iters,
            lr=c.lr,
            lr_min=c.lr_min,
            ema=c.ema,
            device=device,
            generator=generator,
            callbacks=callbacks,
            progress=progress,
        )
        self.state.train_seconds = time.perf_counter() - start
        self.state.history = [dict(r) for r in self.result.history]


class WFRFlowMatching(MatchingModel):
    """WFR-FM: unbalanced plans under the WFR cost between consecutive time points, closed-form Dirac WFR
    geodesics as targets, weighted regression of a velocity and a growth field shared over all intervals.

    After `fit`: `plans` (the UnbalancedPlans, with the static WFR costs) and `result` (the core FitResult).
    """

    method = "wfr_fm"
    config_cls = WFRConfig

    def _sampler(self, series: TimeSeries, *, device, generator) -> WFRSampler:
        c = self.config
        self.plans = self.reuse_plans or unbalanced_plans(
            series,
            delta=c.delta,
            reg_m=c.reg_m,
            chunk=c.chunk,
            num_iter_max=c.plan_iters,
            solver=c.plan_solver,
            eps=c.plan_eps,
            device=device,
            generator=generator,
        )
        return WFRSampler(series, self.plans, batch=c.batch, sigma=c.sigma, device=device)
