"""MAC-Flow's measurements: W2 between joint-action samples (and to the product of their marginals), the value-gap
bound |V_joint - V_fact| <= L_Q W2 with L_Q from finite differences, the weights of a mixture's modes in samples, and
the latency of acting with the network calls counted."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from flowlab.core.distributions import rand
from flowlab.core.metrics import wasserstein
from flowlab.rl_control.envs.coordination import product_of_marginals
from flowlab.rl_control.mac_flow.agents import MARLAgent

__all__ = [
    "Latency",
    "ValueGap",
    "joint_w2",
    "lipschitz_estimate",
    "measure_latency",
    "mode_weights",
    "product_w2",
    "value_gap",
]


def joint_w2(x: torch.Tensor, y: torch.Tensor) -> float:
    """Exact W2 (POT's emd) between two sets of joint actions x: (M, N, A), y: (M', N, A), flattened to (M, N * A)."""
    return float(wasserstein(x.flatten(1).double(), y.flatten(1).double(), p=2))


def product_w2(actions: torch.Tensor, *, generator: torch.Generator) -> float:
    """W2 between joint actions (M, N, A) and draws from the product of their per-agent marginals (the same actions,
    each agent's column shuffled): 0 when the agents act independently, larger the more they coordinate."""
    return joint_w2(actions, product_of_marginals(actions, generator=generator))


def lipschitz_estimate(
    payoff: Callable[[torch.Tensor], torch.Tensor],
    shape: tuple[int, int],
    *,
    generator: torch.Generator,
    n_points: int = 20_000,
    h: float = 1e-4,
) -> float:
    """L_Q ~ max ||grad r|| over `n_points` uniform joint actions in [-1, 1]^shape, the gradient by central finite
    differences of step h in every coordinate (float64). payoff: (B, N, A) -> (B,)."""
    a = 2.0 * rand((n_points, *shape), generator=generator, dtype=torch.float64) - 1.0
    d = a[0].numel()
    steps = h * torch.eye(d, dtype=torch.float64).reshape(d, *shape)
    up = payoff((a[:, None] + steps).flatten(0, 1)).reshape(n_points, d)
    down = payoff((a[:, None] - steps).flatten(0, 1)).reshape(n_points, d)
    return float(((up - down) / (2 * h)).norm(dim=1).max())


@dataclass(frozen=True)
class ValueGap:
    """V_joint and V_fact (mean payoffs of the two sample sets), their gap, W2 between the sets, L_Q, and whether
    gap <= L_Q * W2 (Kantorovich-Rubinstein with W1 <= W2: it must hold for a true Lipschitz constant)."""

    v_joint: float
    v_fact: float
    gap: float
    w2: float
    lipschitz: float
    holds: bool


def value_gap(
    payoff: Callable[[torch.Tensor], torch.Tensor], joint: torch.Tensor, fact: torch.Tensor, lipschitz: float
) -> ValueGap:
    """The bound of MAC-Flow's Prop. 4.3 on samples: joint (M, N, A) from the joint flow, fact (M, N, A) from the
    decentralised policies, L_Q = `lipschitz`."""
    v_joint, v_fact = float(payoff(joint.double()).mean()), float(payoff(fact.double()).mean())
    w2 = joint_w2(joint, fact)
    gap = abs(v_joint - v_fact)
    return ValueGap(v_joint, v_fact, gap, w2, lipschitz, gap <= lipschitz * w2 + 1e-9)


def mode_weights(actions: torch.Tensor, modes: torch.Tensor) -> torch.Tensor:
    """The share of joint actions (M, N, A) nearest to each of the modes (K, N, A): (K,)."""
    nearest = torch.cdist(actions.flatten(1).double(), modes.flatten(1).double().to(actions.device)).argmin(1)
    return torch.bincount(nearest, minlength=len(modes)).double() / len(actions)


@dataclass(frozen=True)
class Latency:
    """Median wall milliseconds per `act` call (one joint action for each of `batch` environments) and the network
    calls one act makes."""

    batch: int
    ms: float
    network_calls: int


def measure_latency(agent: MARLAgent, obs: torch.Tensor, *, repeats: int = 1000, warmup: int = 20) -> Latency:
    """Time `agent.act(obs)` (obs: (B, N, O), under inference mode) `repeats` times after `warmup` calls, synchronising
    CUDA around each, and count the forward calls of `agent.act_network` during one act."""
    calls = 0

    def count(*_):
        nonlocal calls
        calls += 1

    generator = torch.Generator().manual_seed(0)
    handle = agent.act_network.register_forward_hook(count)
    try:
        agent.act(obs, generator=generator)
    finally:
        handle.remove()
    sync = torch.cuda.synchronize if obs.device.type == "cuda" else (lambda: None)
    for _ in range(warmup):
        agent.act(obs, generator=generator)
    times = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        agent.act(obs, generator=generator)
        sync()
        times.append(time.perf_counter() - start)
    return Latency(obs.shape[0], 1e3 * statistics.median(times), calls)
