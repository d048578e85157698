"""UOT-CFM baseline: pairs from the same unbalanced WFR-cost plan as WFR-FM, straight paths, no growth field."""

from __future__ import annotations

from dataclasses import dataclass

from flowlab.biology_dynamics.wfr_fm.model import MatchingModel, check_training_fields
from flowlab.biology_dynamics.wfr_fm.objective import WFRSampler, unbalanced_plans
from flowlab.core.config import Config

__all__ = ["UOTCFM", "UOTCFMConfig"]


@dataclass(frozen=True)
class UOTCFMConfig(Config):
    """UOT-CFM settings; delta, reg_m and chunk define the unbalanced plan as for WFR-FM."""

    delta: float = 2.0
    v_hidden: tuple[int, ...] = (256,) * 5
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
        if not self.reg_m > 0:
            raise ValueError(f"reg_m: expected a positive marginal penalty, got {self.reg_m!r}")
        check_training_fields(self)


class UOTCFM(MatchingModel):
    """Flow matching on unbalanced-plan pairs: the plan reweights who goes where, but mass is not modelled."""

    method = "uot_cfm"
    config_cls = UOTCFMConfig

    learns_growth = False

    def _sampler(self, series, *, device, generator) -> WFRSampler:
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
        return WFRSampler(series, self.plans, batch=c.batch, straight=True, device=device)
