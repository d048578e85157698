"""The GFM training objective: Riemannian flow matching on the diagonal plus one self-distillation term.

Objectives (the loss functions are the core's `losses.flow_map`, called with `manifold=`):
- "lsd" (G-LSD), "esd" (G-ESD), "psd" (G-PSD): L = L_RFM (first round(diag_fraction·B) rows, default 25 %, t ~
  U[0, t_max]) +
  sd_weight · L_SD (the other rows, (s, t) uniform on {0 <= s <= t <= t_max}, optionally t − s <= max_gap, a share
  `source_fraction` of them moved to start at s = 0), both on
  the geodesic interpolant I_s = exp_{x_0}(s log_{x_0} x_1) with independent (x_0, x_1).
- "mf" (G-MF): the extrinsic Riemannian MeanFlow regression on all rows, a fraction `diag_fraction` (default 75 %)
  of them on the diagonal (where it is RFM); no separate diagonal term. Our construction, the paper's exact form is
  unverified.
- "rfm": the RFM baseline, L_RFM on every row.

With a `teacher` (a pretrained field v_T(x, t), e.g. a trained RFM model's `diagonal_field`) the diagonal rows
regress v_{t,t}(x_t) onto sg[v_T(x_t, t)] instead of the conditional velocity, and the self-distillation term takes
its velocity target from v_T instead of the map's own diagonal (issue 39: distillation from the RFM teacher).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from flowlab.core.flowmaps import sample_time_pairs
from flowlab.core.losses.flow_map import diagonal_fm_loss, esd_loss, lsd_loss, meanflow_loss, psd_loss
from flowlab.core.manifolds.base import Manifold
from flowlab.core.paths.base import PathSample
from flowlab.core.paths.geodesic import GeodesicPath
from flowlab.core.validation import check_choice, check_same_batch

__all__ = ["DEFAULT_DIAG_FRACTION", "OBJECTIVES", "TEACHER_OBJECTIVES", "GFMLoss", "gfm_loss"]

OBJECTIVES = ("lsd", "esd", "psd", "mf", "rfm")
#: the objectives whose target is a velocity field, so that a pretrained teacher field can replace the diagonal's
TEACHER_OBJECTIVES = ("lsd", "esd")

#: the share of each batch on the diagonal when `diag_fraction` is None: the spec's 25 % for the self-distillation
#: objectives; 75 % for G-MF, MeanFlow's own ratio (25 % of pairs with s != t). On T² (quick, seed 0; README) G-MF
#: had KL 1.37 and MMD@100 0.46 with 25 %, KL 0.075 and MMD@100 0.036 with 75 % (RFM: MMD@100 0.046)
DEFAULT_DIAG_FRACTION = {"lsd": 0.25, "esd": 0.25, "psd": 0.25, "mf": 0.75, "rfm": 1.0}


@dataclass(frozen=True)
class GFMLoss:
    """loss: the scalar to minimise; logs: its parts (detached scalars: "rfm", "sd")."""

    loss: torch.Tensor
    logs: dict[str, torch.Tensor]


def _uniform(n: int, high: float, generator, like: torch.Tensor) -> torch.Tensor:
    return (high * torch.rand(n, generator=generator, dtype=like.dtype)).to(like.device)


def gfm_loss(
    flow_map: Any,
    x_0: torch.Tensor,
    x_1: torch.Tensor,
    *,
    objective: str,
    manifold: Manifold,
    generator: torch.Generator | None = None,
    diag_fraction: float | None = None,
    sd_weight: float = 1.0,
    t_max: float = 1.0 - 1e-3,
    max_gap: float | None = None,
    source_fraction: float = 0.0,
    esd_stopgrad: str = "none",
    lsd_derivative: str = "jvp",
    teacher: Any = None,
) -> GFMLoss:
    """One GFM loss evaluation on source draws x_0 and data x_1: (B, ambient_dim) on `manifold`.

    flow_map: a two-time map with `velocity` (e.g. `build_flow_map(...)`). `generator` (CPU) draws the times.
    See the module docstring for the objectives; `esd_stopgrad` is passed to `esd_loss` ("none" | "pushforward"),
    `lsd_derivative` to `lsd_loss` as its `derivative` ("jvp" | "fd" | "fd_forward": ∂_t X by a central or
    forward difference).
    `teacher`: a frozen field `teacher(x=, t=)` for "lsd" and "esd" (module docstring; G-PSD's teacher would be a
    flow map making its half jumps, RFM and G-MF have no self-distillation target).
    The default differs from the spec's "pushforward", which diverged in training on volcano and T² (see README).
    """
    check_choice(objective, OBJECTIVES, "objective")
    if not isinstance(manifold, Manifold):
        raise ValueError(f"manifold: expected a flowlab.core.manifolds.Manifold, got {type(manifold).__name__}")
    batch = check_same_batch(x_0=x_0, x_1=x_1)
    if not 0.0 < float(t_max) < 1.0:
        raise ValueError(f"t_max: expected a value in (0, 1), got {t_max!r}")
    if teacher is not None and objective not in TEACHER_OBJECTIVES:
        raise ValueError(f"teacher: distillation from a teacher field is for {TEACHER_OBJECTIVES}, not {objective!r}")
    if teacher is not None and not callable(teacher):
        raise ValueError(f"teacher: expected a vector field teacher(x=, t=), got {type(teacher).__name__}")
    if diag_fraction is None:
        diag_fraction = DEFAULT_DIAG_FRACTION[objective]
    if not 0.0 <= float(diag_fraction) <= 1.0:
        raise ValueError(f"diag_fraction: expected a value in [0, 1], got {diag_fraction!r}")
    path = GeodesicPath(manifold)
    zero = x_0.new_zeros(())

    if objective == "rfm":
        rfm = diagonal_fm_loss(
            flow_map, path.sample(x_0, x_1, _uniform(batch, t_max, generator, x_0)), manifold=manifold
        )
        return GFMLoss(rfm, {"rfm": rfm.detach(), "sd": zero})

    if objective == "mf":
        pairs = sample_time_pairs(
            batch, diag_fraction=diag_fraction, max_gap=max_gap, high=t_max, source_fraction=source_fraction,
            generator=generator,
        )  # fmt: skip
        s, t = pairs.s.to(x_0), pairs.t.to(x_0)
        sample = path.sample(x_0, x_1, s)
        mf = meanflow_loss(flow_map, sample.x_t, s, t, sample.dx_t, manifold=manifold)
        return GFMLoss(mf, {"rfm": zero, "sd": mf.detach()})

    n_diag = round(float(diag_fraction) * batch)
    # with a teacher every target comes from it, so the diagonal rows are optional (none for an AnchoredFlowMap,
    # whose diagonal is the teacher's); self-distillation needs them to anchor the map
    if not (0 if teacher is not None else 1) <= n_diag < batch:
        raise ValueError(
            f"diag_fraction: {diag_fraction} of a batch of {batch} leaves no rows for the diagonal or the "
            f"self-distillation term of {objective!r}"
        )
    rfm = zero
    if n_diag:
        diagonal = path.sample(x_0[:n_diag], x_1[:n_diag], _uniform(n_diag, t_max, generator, x_0))
        if teacher is not None:
            with torch.no_grad():
                target = manifold.proju(diagonal.x_t, teacher(x=diagonal.x_t, t=diagonal.t).detach())
            diagonal = PathSample(diagonal.x_0, diagonal.x_1, diagonal.t, diagonal.x_t, target)
        rfm = diagonal_fm_loss(flow_map, diagonal, manifold=manifold)
    pairs = sample_time_pairs(
        batch - n_diag, diag_fraction=0.0, max_gap=max_gap, high=t_max, source_fraction=source_fraction,
        generator=generator,
    )  # fmt: skip
    s, t = pairs.s.to(x_0), pairs.t.to(x_0)
    x_s = path.sample(x_0[n_diag:], x_1[n_diag:], s).x_t
    if objective == "lsd":
        sd = lsd_loss(flow_map, x_s, s, t, teacher=teacher, manifold=manifold, derivative=lsd_derivative)
    elif objective == "esd":
        sd = esd_loss(flow_map, x_s, s, t, teacher=teacher, stopgrad=esd_stopgrad, manifold=manifold)
    else:
        sd = psd_loss(flow_map, x_s, s, t, manifold=manifold)
    return GFMLoss(rfm + sd_weight * sd, {"rfm": rfm.detach(), "sd": sd.detach()})
