"""What the WT-ASBS scenarios share: their variants' base type, the spec's force clip, the samplers' seeds."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from flowlab.core.config import Config
from flowlab.molecular.wt_asbs.asbs import SamplerConfig

__all__ = ["CLIP_100_PER_ANGSTROM", "WTASBSBench", "sampler_seed"]

#: the spec's per-atom clip of grad(E)/kT, 100 per Angstrom, in the molecular systems' unit (per nm)
CLIP_100_PER_ANGSTROM = 1000.0


@dataclass(frozen=True)
class WTASBSBench(Config):
    """sampler: WT-ASBS (and, without its bias, the ASBS baseline), as `flowlab molecular sample` builds it;
    n_eval: samples drawn from each trained sampler."""

    sampler: SamplerConfig
    n_eval: int


def sampler_seed(generator: torch.Generator) -> int:
    """A sampler's own seed, drawn from the scenario's generator: an int in [0, 2^31 - 1)."""
    return int(torch.randint(0, 2**31 - 1, (1,), generator=generator))
