"""OT-CFM baseline: balanced minibatch exact-OT pairs between consecutive time points, straight paths, no growth."""

from __future__ import annotations

import time
from dataclasses import dataclass

from flowlab.biology_dynamics.wfr_fm.model import GrowthFields, TimeCourseModel, _check_config
from flowlab.biology_dynamics.wfr_fm.objective import ExactOTSampler, train_matching

__all__ = ["OTCFM", "OTCFMConfig"]


@dataclass(frozen=True)
class OTCFMConfig:
    """OT-CFM settings: batch cells per side and interval per step (the minibatch OT size)."""

    v_hidden: tuple[int, ...] = (256,) * 5
    act: str = "tanh"
    time_scale: float = 30.0
    time_embed_dim: int = 32
    iters: int = 3000
    batch: int = 256
    lr: float = 5e-3
    lr_min: float = 1e-5
    ema: float | None = 0.995

    def __post_init__(self) -> None:
        _check_config(self)


class OTCFM(TimeCourseModel):
    """Conditional flow matching with minibatch OT pairs (Tong et al.): the mass of every particle stays 1."""

    method = "ot_cfm"
    config_cls = OTCFMConfig

    def _build(self, dim: int) -> GrowthFields:
        return GrowthFields(
            dim,
            v_hidden=self.config.v_hidden,
            act=self.config.act,
            growth=False,
            time_scale=self.config.time_scale,
            time_embed_dim=self.config.time_embed_dim,
        )

    def _train(self, series, *, device, generator, callbacks, progress) -> None:
        c = self.config
        start = time.perf_counter()
        sampler = ExactOTSampler(series, batch=c.batch, device=device)
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
