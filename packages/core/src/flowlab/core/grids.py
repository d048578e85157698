"""Time grids over core time (t=0 source, t=1 data). Flip a grid (`grid.flip(0)`) to run it from data to source."""

from __future__ import annotations

import torch

from flowlab.core.schedules import EDM, DiscreteVP, Schedule

__all__ = ["karras", "logsnr_uniform", "shifted", "time_uniform", "trailing", "uniform"]


def _check_n(n: int) -> None:
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n: expected a positive number of steps, got {n!r}")


def uniform(
    n: int, *, start: float = 0.0, end: float = 1.0, device: torch.device | str | None = None, dtype=None
) -> torch.Tensor:
    """n steps: (n + 1,) equally spaced times from `start` to `end`."""
    _check_n(n)
    return torch.linspace(start, end, n + 1, device=device, dtype=dtype or torch.get_default_dtype())


time_uniform = uniform


def shifted(n: int, shift: float, *, device: torch.device | str | None = None, dtype=None) -> torch.Tensor:
    """SD3-style warp of a uniform grid, spending more steps near the source for shift > 1.

    In noise-level form s = 1 - t the warp is s' = shift s / (1 + (shift - 1) s)."""
    if not shift > 0:
        raise ValueError(f"shift: expected a positive shift, got {shift}")
    s = 1 - uniform(n, device=device, dtype=dtype)
    return 1 - shift * s / (1 + (shift - 1) * s)


def logsnr_uniform(
    n: int,
    schedule: Schedule,
    *,
    t_start: float = 0.0,
    t_end: float = 1.0,
    device: torch.device | str | None = None,
    dtype=None,
) -> torch.Tensor:
    """n steps equally spaced in lambda = log(alpha/sigma) between t_start and t_end (endpoints kept exactly)."""
    _check_n(n)
    dtype = dtype or torch.get_default_dtype()
    ends = torch.tensor([t_start, t_end], dtype=torch.float64)
    lam = schedule.log_snr(ends)
    if not bool(torch.isfinite(lam).all()):
        raise ValueError(
            "t_start, t_end: log-SNR is infinite at an endpoint; pick endpoints inside (0, 1) for this schedule"
        )
    lams = torch.linspace(float(lam[0]), float(lam[1]), n + 1, dtype=torch.float64)
    t = schedule.snr_inverse(torch.exp(lams))
    t[0], t[-1] = t_start, t_end
    return t.to(device=device, dtype=dtype)


def karras(
    n: int,
    schedule: Schedule | None = None,
    *,
    sigma_min: float = 0.002,
    sigma_max: float = 80.0,
    rho: float = 7.0,
    device: torch.device | str | None = None,
    dtype=None,
) -> torch.Tensor:
    """The EDM noise levels sigma_i = (sigma_max^(1/rho) + i/n (sigma_min^(1/rho) - sigma_max^(1/rho)))^rho, i = 0..n,
    as core times of `schedule` (the time whose sigma/alpha equals sigma_i). Without a schedule the times are those of
    `EDM(sigma_min, sigma_max, rho)`, where the grid is uniform in t."""
    _check_n(n)
    edm = EDM(sigma_min, sigma_max, rho)
    t_edm = uniform(n, dtype=torch.float64)
    if schedule is None:
        return t_edm.to(device=device, dtype=dtype or torch.get_default_dtype())
    sigmas = edm(t_edm).sigma
    return schedule.snr_inverse(1 / sigmas).to(device=device, dtype=dtype or torch.get_default_dtype())


def trailing(
    schedule: DiscreteVP, steps: int, *, device: torch.device | str | None = None, dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    """diffusers' "trailing" timestep spacing on a discrete schedule of K steps: (steps + 1,) core times of the
    timesteps round(K - i K / steps) - 1 for i < steps, then of timestep 0 (t = 1 - 1/K). On this grid the core's DDIM
    equals diffusers' DDIMScheduler(timestep_spacing="trailing", set_alpha_to_one=False)."""
    if not isinstance(schedule, DiscreteVP):
        raise ValueError(f"schedule: expected a DiscreteVP, got {type(schedule).__name__}")
    k_max = schedule.num_steps
    if not (isinstance(steps, int) and not isinstance(steps, bool) and 1 <= steps < k_max):
        raise ValueError(f"steps: expected an integer in [1, {k_max}), got {steps!r}")
    k = torch.round(k_max - torch.arange(steps, dtype=torch.float64) * k_max / steps) - 1
    k = torch.cat([k, torch.zeros(1, dtype=torch.float64)])
    return schedule.time_of(k).to(device=device, dtype=dtype)
