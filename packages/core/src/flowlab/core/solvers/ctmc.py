"""Sampling discrete mixture paths with a learned posterior p(x_1 | x_t): a continuous-time Markov chain.

On a mixture path (`flowlab.core.paths.discrete`) the marginal rate of a token is kappa'_t / (1 - kappa_t) times
(p(x_1 | x_t) - delta_{x_t}) (Flow Matching Guide, Lipman et al. 2024, mixture paths). Integrating that rate over a
step [s, t] gives the jump probability (kappa_t - kappa_s) / (1 - kappa_s), with which a token is redrawn from the
posterior:

- masked path: only masked tokens jump (unmask), drawing from softmax(logits) with the mask token excluded;
  unmasked tokens are frozen (MDLM / absorbing-state sampling);
- uniform path: every token jumps with that probability to a fresh draw from the posterior (which may return it to
  the same token).

For a posterior that factorises over positions (exactly true for independent tokens) the marginals at every grid
time are those of the path, whatever the step size.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from flowlab.core.distributions import multinomial, rand
from flowlab.core.paths.discrete import MaskedDiscretePath, MixtureDiscretePath, UniformDiscretePath
from flowlab.core.solvers.trajectory import StepInfo, Trajectory, check_callback
from flowlab.core.validation import check_grid, check_tensor

__all__ = ["solve_ctmc"]


def solve_ctmc(
    posterior,
    path: MixtureDiscretePath,
    x_init: torch.Tensor,
    grid: torch.Tensor,
    *,
    generator: torch.Generator | None = None,
    temperature: float = 1.0,
    top_p: float | None = None,
    return_trajectory: bool = False,
    callback: Callable[[StepInfo], Any] | None = None,
    **cond: Any,
) -> torch.Tensor | Trajectory:
    """Run the path's CTMC from x_init at grid[0] to grid[-1].

    posterior(x=x_t, t=t, **cond) -> logits (B, L, V) of p(x_1 | x_t); path: a `MaskedDiscretePath` or
    `UniformDiscretePath`; x_init: (B, L) long tokens (all masks, a partly masked prompt, or uniform noise);
    grid: (n+1,) increasing times. temperature divides the logits; top_p keeps the smallest set of tokens whose
    probability reaches top_p (nucleus sampling); both are off by default. Returns x: (B, L) at grid[-1], or
    `Trajectory(times=grid, states=(n+1, B, L))`; `callback` receives a `StepInfo` after every step.
    """
    if not callable(posterior):
        raise ValueError(f"posterior: expected a callable posterior(x=, t=, **cond), got {type(posterior).__name__}")
    if not isinstance(path, MaskedDiscretePath | UniformDiscretePath):
        raise ValueError(f"path: expected a MaskedDiscretePath or UniformDiscretePath, got {type(path).__name__}")
    check_tensor(x_init, "x_init", min_dim=2)
    if x_init.dtype != torch.long:
        raise ValueError(f"x_init: expected integer tokens of dtype torch.long, got {x_init.dtype}")
    if bool((x_init < 0).any()):
        raise ValueError("x_init: expected non-negative token ids")
    if isinstance(path, UniformDiscretePath) and bool((x_init >= path.vocab_size).any()):
        raise ValueError(f"x_init: expected tokens in [0, {path.vocab_size}) for the uniform path")
    check_grid(grid)
    if not bool((grid[1:] > grid[:-1]).all()):
        raise ValueError("grid: expected increasing times (source at grid[0] -> data at grid[-1])")
    if not (isinstance(temperature, int | float) and temperature > 0):
        raise ValueError(f"temperature: expected a positive number, got {temperature!r}")
    if top_p is not None and not (isinstance(top_p, int | float) and 0 < top_p <= 1):
        raise ValueError(f"top_p: expected a number in (0, 1] or None, got {top_p!r}")
    check_callback(callback)

    grid = grid.to(device=x_init.device)
    if not grid.is_floating_point():
        grid = grid.to(torch.get_default_dtype())
    kappa, _ = path.kappa_at(grid)
    # jump probability of a not-yet-data token over each step; kappa_s = 1 means nothing is left to jump
    left = 1 - kappa[:-1]
    jump_prob = torch.where(left > 0, (kappa[1:] - kappa[:-1]) / left.clamp_min(torch.finfo(left.dtype).tiny), 0)
    jump_prob = jump_prob.clamp(0, 1)

    x, states = x_init, [x_init]
    batch = x.shape[0]
    times = grid[:, None].repeat(1, batch).unbind(0)
    for i in range(grid.numel() - 1):
        logits = posterior(x=x, t=times[i], **cond)
        probs = _probabilities(logits, x, path, temperature, top_p)
        draw = multinomial(probs.reshape(-1, probs.shape[-1]), 1, generator=generator).reshape(x.shape)
        jump = rand(x.shape, generator=generator, device=x.device, dtype=grid.dtype) < jump_prob[i]
        if isinstance(path, MaskedDiscretePath):
            jump = jump & (x == path.mask_id)
        x = torch.where(jump, draw, x)
        if return_trajectory:
            states.append(x)
        if callback is not None:
            callback(StepInfo(i, times[i], times[i + 1], x))
    if return_trajectory:
        return Trajectory(times=grid, states=torch.stack(states))
    return x


def _probabilities(logits, x, path, temperature, top_p) -> torch.Tensor:
    """logits: (B, L, V) -> probabilities (B, L, V) after masking, temperature and nucleus filtering."""
    if not isinstance(logits, torch.Tensor) or logits.dim() != x.dim() + 1 or logits.shape[:-1] != x.shape:
        shape = tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__
        raise ValueError(f"posterior: expected logits of shape {(*x.shape, 'V')}, got {shape}")
    if isinstance(path, UniformDiscretePath) and logits.shape[-1] != path.vocab_size:
        raise ValueError(f"posterior: expected {path.vocab_size} logits per token, got {logits.shape[-1]}")
    logits = logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits
    if isinstance(path, MaskedDiscretePath) and path.mask_id < logits.shape[-1]:
        logits = logits.index_fill(-1, torch.tensor([path.mask_id], device=logits.device), float("-inf"))
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_p is not None and top_p < 1:
        sorted_p, order = probs.sort(dim=-1, descending=True)
        outside = (sorted_p.cumsum(-1) - sorted_p) >= top_p  # mass before a token already reaches top_p
        probs = probs.scatter(-1, order, sorted_p.masked_fill(outside, 0))
        probs = probs / probs.sum(-1, keepdim=True)
    return probs
