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

`solve_ctmc` runs the whole loop. A sampler that constrains each step (no self-loops, compatibility masks) runs its
own loop of `ctmc_step` with the probabilities of `jump_probabilities(path, grid)` and an `allowed` mask per step;
with the same generator, the loop `solve_ctmc` runs is exactly that loop without a mask.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from flowlab.core.distributions import multinomial, rand
from flowlab.core.paths.discrete import MaskedDiscretePath, MixtureDiscretePath, UniformDiscretePath
from flowlab.core.solvers.trajectory import StepInfo, Trajectory, check_callback
from flowlab.core.validation import check_grid, check_tensor

__all__ = ["ctmc_step", "jump_probabilities", "solve_ctmc"]


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
    _check_knobs(temperature, top_p)
    check_callback(callback)

    grid = grid.to(device=x_init.device)
    if not grid.is_floating_point():
        grid = grid.to(torch.get_default_dtype())
    jump_prob = jump_probabilities(path, grid)

    x, states = x_init, [x_init]
    batch = x.shape[0]
    times = grid[:, None].repeat(1, batch).unbind(0)
    for i in range(grid.numel() - 1):
        logits = posterior(x=x, t=times[i], **cond)
        x = ctmc_step(path, x, logits, jump_prob[i], generator=generator, temperature=temperature, top_p=top_p)
        if return_trajectory:
            states.append(x)
        if callback is not None:
            callback(StepInfo(i, times[i], times[i + 1], x))
    if return_trajectory:
        return Trajectory(times=grid, states=torch.stack(states))
    return x


def jump_probabilities(path: MixtureDiscretePath, grid: torch.Tensor) -> torch.Tensor:
    """grid: (n+1,) increasing float times -> (n,) probability that a token not yet at the data jumps over each
    step [s, t]: (kappa_t - kappa_s) / (1 - kappa_s), clamped to [0, 1] (0 where kappa_s = 1: nothing left)."""
    kappa, _ = path.kappa_at(grid)
    left = 1 - kappa[:-1]
    jump_prob = torch.where(left > 0, (kappa[1:] - kappa[:-1]) / left.clamp_min(torch.finfo(left.dtype).tiny), 0)
    return jump_prob.clamp(0, 1)


def ctmc_step(
    path: MixtureDiscretePath,
    x: torch.Tensor,
    logits: torch.Tensor,
    jump_prob: torch.Tensor | float,
    *,
    allowed: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    temperature: float = 1.0,
    top_p: float | None = None,
) -> torch.Tensor:
    """One CTMC step of the path: x: (B, L) long tokens -> x: (B, L) after the step.

    logits: (B, L, V) of the posterior p(x_1 | x) at the step's start; jump_prob: the step's probability that a
    token not yet at the data jumps (a number, a 0-dim tensor or (B,) per sample; one entry of
    `jump_probabilities(path, grid)`). A jumping token is redrawn from softmax(logits / temperature), nucleus-
    filtered by top_p; on a masked path only mask tokens jump and never to the mask token. allowed: (B, L, V) bool
    or None; a token may only jump to an allowed value (the draw is renormalised over them), and a token with no
    allowed value stays as it is. Draws the tokens, then the jump decisions, from `generator`. Only shapes and dtypes
    are checked (no host synchronisation), so it can run inside a sampling loop.
    """
    if not isinstance(path, MaskedDiscretePath | UniformDiscretePath):
        raise ValueError(f"path: expected a MaskedDiscretePath or UniformDiscretePath, got {type(path).__name__}")
    if not isinstance(x, torch.Tensor) or x.dtype != torch.long or x.dim() < 2:
        got = f"{x.dtype} {tuple(x.shape)}" if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"x: expected long tokens of shape (B, L), got {got}")
    _check_knobs(temperature, top_p)
    probs = _probabilities(logits, x, path, temperature, top_p, allowed)
    draw = multinomial(probs.reshape(-1, probs.shape[-1]), 1, generator=generator).reshape(x.shape)
    dtype = probs.dtype if not isinstance(jump_prob, torch.Tensor) else jump_prob.dtype
    jump = rand(x.shape, generator=generator, device=x.device, dtype=dtype) < _per_sample(jump_prob, x)
    if isinstance(path, MaskedDiscretePath):
        jump = jump & (x == path.mask_id)
    if allowed is not None:
        jump = jump & _reachable(allowed, path)
    return torch.where(jump, draw, x)


def _check_knobs(temperature: float, top_p: float | None) -> None:
    if not (isinstance(temperature, int | float) and temperature > 0):
        raise ValueError(f"temperature: expected a positive number, got {temperature!r}")
    if top_p is not None and not (isinstance(top_p, int | float) and 0 < top_p <= 1):
        raise ValueError(f"top_p: expected a number in (0, 1] or None, got {top_p!r}")


def _per_sample(jump_prob: torch.Tensor | float, x: torch.Tensor) -> torch.Tensor | float:
    """jump_prob: a number, 0-dim or (B,) -> itself, or (B, 1, ...) broadcastable against x: (B, L, ...)."""
    if not isinstance(jump_prob, torch.Tensor) or jump_prob.dim() == 0:
        return jump_prob
    if jump_prob.shape != x.shape[:1]:
        shape = tuple(jump_prob.shape)
        raise ValueError(f"jump_prob: expected a number, a 0-dim tensor or shape ({x.shape[0]},), got {shape}")
    return jump_prob.reshape(-1, *([1] * (x.dim() - 1)))


def _reachable(allowed: torch.Tensor, path: MixtureDiscretePath) -> torch.Tensor:
    """allowed: (B, L, V) -> (B, L): the positions with at least one allowed value to jump to."""
    if isinstance(path, MaskedDiscretePath) and path.mask_id < allowed.shape[-1]:
        allowed = allowed.index_fill(-1, torch.tensor([path.mask_id], device=allowed.device), False)
    return allowed.any(-1)


def _probabilities(logits, x, path, temperature, top_p, allowed=None) -> torch.Tensor:
    """logits: (B, L, V) -> probabilities (B, L, V) after masking, constraints, temperature and nucleus filtering.

    Positions where `allowed` leaves nothing get uniform probabilities (a placeholder: `ctmc_step` keeps them)."""
    if not isinstance(logits, torch.Tensor) or logits.dim() != x.dim() + 1 or logits.shape[:-1] != x.shape:
        shape = tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__
        raise ValueError(f"posterior: expected logits of shape {(*x.shape, 'V')}, got {shape}")
    if isinstance(path, UniformDiscretePath) and logits.shape[-1] != path.vocab_size:
        raise ValueError(f"posterior: expected {path.vocab_size} logits per token, got {logits.shape[-1]}")
    if allowed is not None and (
        not isinstance(allowed, torch.Tensor) or allowed.dtype != torch.bool or allowed.shape != logits.shape
    ):
        got = f"{allowed.dtype} {tuple(allowed.shape)}" if isinstance(allowed, torch.Tensor) else type(allowed).__name__
        raise ValueError(f"allowed: expected a bool tensor of the logits' shape {tuple(logits.shape)}, got {got}")
    logits = logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits
    if isinstance(path, MaskedDiscretePath) and path.mask_id < logits.shape[-1]:
        logits = logits.index_fill(-1, torch.tensor([path.mask_id], device=logits.device), float("-inf"))
    if allowed is not None:
        logits = logits.masked_fill(~allowed, float("-inf"))
        logits = logits.masked_fill(~_reachable(allowed, path)[..., None], 0.0)
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_p is not None and top_p < 1:
        sorted_p, order = probs.sort(dim=-1, descending=True)
        outside = (sorted_p.cumsum(-1) - sorted_p) >= top_p  # mass before a token already reaches top_p
        probs = probs.scatter(-1, order, sorted_p.masked_fill(outside, 0))
        probs = probs / probs.sum(-1, keepdim=True)
    return probs
