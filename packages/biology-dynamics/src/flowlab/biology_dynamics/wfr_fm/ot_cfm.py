"""OT-CFM baseline: balanced minibatch exact-OT pairs between consecutive time points, straight paths, no growth."""

from __future__ import annotations

from dataclasses import dataclass

from flowlab.biology_dynamics.wfr_fm.model import MatchingModel, check_training_fields
from flowlab.biology_dynamics.wfr_fm.objective import ExactOTSampler
from flowlab.core.config import Config

__all__ = ["OTCFM", "OTCFMConfig"]


@dataclass(frozen=True)
class OTCFMConfig(Config):
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
        super().__post_init__()
        check_training_fields(self)


class OTCFM(MatchingModel):
    """Conditional flow matching with minibatch OT pairs (Tong et al.): the mass of every particle stays 1."""

    method = "ot_cfm"
    config_cls = OTCFMConfig

    learns_growth = False

    def _sampler(self, series, *, device, generator) -> ExactOTSampler:
        return ExactOTSampler(series, batch=self.config.batch, device=device)
