"""Networks: the return-flow critic of Value Flows, the behaviour-cloning flow actor with rejection sampling, and the
C51, IQN and scalar critics of the baselines. Every critic keeps a Polyak-averaged target copy (`update_target`)."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from flowlab.core import grids
from flowlab.core.distributions import rand, randn
from flowlab.core.losses import flow_matching_loss
from flowlab.core.nets import MLP, TimeMLP
from flowlab.core.paths import AffinePath
from flowlab.core.schedules import CondOT
from flowlab.core.solvers import JVPState, clipped_euler, clipped_jvp_euler, solve_ode

__all__ = [
    "C51Critic",
    "FlowBCPolicy",
    "IQNCritic",
    "OneStepPolicy",
    "ReturnFlow",
    "ReturnFlowCritic",
    "ScalarCritic",
    "TargetNetwork",
    "aggregate",
    "rejection_sample",
]


def aggregate(values: torch.Tensor, how: str) -> torch.Tensor:
    """Aggregate over the leading critic axis: values (K, ...) -> (...) by "mean" or "min"."""
    if how == "mean":
        return values.mean(0)
    if how == "min":
        return values.min(0).values
    raise ValueError(f"how: expected 'mean' or 'min', got {how!r}")


class TargetNetwork(nn.Module):
    """A module with a frozen Polyak-averaged copy of `self.online` in `self.target`."""

    def __init__(self, online: nn.Module) -> None:
        super().__init__()
        self.online = online
        self.target = copy.deepcopy(online).requires_grad_(False)

    @torch.no_grad()
    def update_target(self, tau: float) -> None:
        """target <- (1 - tau) target + tau online."""
        torch._foreach_lerp_(list(self.target.parameters()), list(self.online.parameters()), tau)

    def pick(self, target: bool) -> nn.Module:
        return self.target if target else self.online


@dataclass(frozen=True)
class ReturnFlow:
    """Flowed returns z: (K, B) per critic and, with `with_jacobian`, J = dz/d(eps): (K, B) (else None)."""

    z: torch.Tensor
    jacobian: torch.Tensor | None


class _ScalarField(nn.Module):
    """v(z, t | s, a) for scalar z: a TimeMLP on (z, t) conditioned on [s, a]."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: Sequence[int]) -> None:
        super().__init__()
        self.net = TimeMLP(1, cond_dim=obs_dim + act_dim, hidden=hidden, layer_norm=True, time_embed_dim=32)

    def forward(self, *, x: torch.Tensor, t: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        return self.net(x=x, t=t, cond=cond)


class ReturnFlowCritic(TargetNetwork):
    """K return flows v_k(z, t | s, a) (t=0: eps ~ N(0, 1), t=1: a return sample), Euler-integrated with
    `num_flow_steps` steps and clipped after each step: to the `path_envelope` of v_range with |eps| <= noise_bound,
    which is v_range at t = 1, or (noise_bound None) to v_range itself at every step, which also clamps the noise
    outside v_range at the first step. `jacobian_mode` ("jvp" or "vjp") picks how the flow derivative dz/d(eps) is
    carried (see `clipped_jvp_euler`)."""

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        hidden: Sequence[int] = (128, 128),
        *,
        n_critics: int = 2,
        num_flow_steps: int = 10,
        v_range: tuple[float, float],
        jacobian_mode: str = "jvp",
        noise_bound: float | None = 5.0,
    ) -> None:
        if n_critics < 1:
            raise ValueError(f"n_critics: expected >= 1, got {n_critics}")
        if not v_range[0] < v_range[1]:
            raise ValueError(f"v_range: expected (low, high) with low < high, got {v_range}")
        super().__init__(nn.ModuleList(_ScalarField(obs_dim, act_dim, hidden) for _ in range(n_critics)))
        self.num_flow_steps = num_flow_steps
        self.v_range = (float(v_range[0]), float(v_range[1]))
        clipped_jvp_euler(0.0, 1.0, mode=jacobian_mode)  # validates the mode
        self.jacobian_mode = jacobian_mode
        self.noise_bound = noise_bound

    def velocity(self, z, t, obs, act, *, target: bool = False) -> torch.Tensor:
        """z, t: (B,), obs: (B, O), act: (B, A) -> v_k(z, t | s, a): (K, B)."""
        cond = torch.cat([obs, act], -1)
        return torch.stack([f(x=z[:, None], t=t, cond=cond)[:, 0] for f in self.pick(target)])

    def returns(
        self,
        eps: torch.Tensor,
        obs: torch.Tensor,
        act: torch.Tensor,
        *,
        end_t: torch.Tensor | None = None,
        target: bool = False,
        with_jacobian: bool = False,
    ) -> ReturnFlow:
        """phi_t(eps | s, a) for every critic: `num_flow_steps` Euler steps of size end_t / n (end_t: (B,), default
        1), clipped as in the class docstring. eps: (B,). With `with_jacobian`, J = d phi / d eps is carried along
        (J_0 = 1)."""
        cond = torch.cat([obs, act], -1)
        grid = grids.uniform(self.num_flow_steps, device=eps.device, dtype=eps.dtype)
        lo, hi = self.v_range
        zs, js = [], []
        clip = {"noise_bound": self.noise_bound, "time_scale": end_t}
        for f in self.pick(target):
            if end_t is None:
                field = f
            else:
                scale = end_t[:, None]

                def field(*, x, t, cond, f=f, scale=scale):  # time rescaled so per-sample end times share one grid
                    return scale * f(x=x, t=t * end_t, cond=cond)

            if with_jacobian:
                out = solve_ode(
                    field,
                    JVPState(eps[:, None], torch.ones_like(eps)[:, None]),
                    grid,
                    method=clipped_jvp_euler(lo, hi, mode=self.jacobian_mode, **clip),
                    cond=cond,
                )
                zs.append(out.x[:, 0])
                js.append(out.tangent[:, 0])
            else:
                zs.append(solve_ode(field, eps[:, None], grid, method=clipped_euler(lo, hi, **clip), cond=cond)[:, 0])
        return ReturnFlow(torch.stack(zs), torch.stack(js) if with_jacobian else None)

    def q(self, obs, act, *, generator: torch.Generator, agg: str = "mean", target: bool = False) -> torch.Tensor:
        """One-call Q estimate eps + v(eps, 0 | s, a), clipped to v_range and aggregated over critics: (B,)."""
        eps = randn((obs.shape[0],), generator=generator, device=obs.device, dtype=obs.dtype)
        v = self.velocity(eps, torch.zeros_like(eps), obs, act, target=target)
        return aggregate((eps + v).clamp(*self.v_range), agg)

    def spread(
        self,
        obs,
        act,
        *,
        generator: torch.Generator,
        agg: str = "mean",
        target: bool = True,
        n_eps: int = 1,
        reduce: str = "mean",
    ) -> torch.Tensor:
        """sigma_hat = |J| = |d phi_1 / d eps| at one eps per (s, a) (the training weight), or over `n_eps` eps its
        mean E|J| or its root mean square sqrt(E[J^2]) (`reduce` "rms": the Gaussian Poincare bound, std(phi_1(eps))
        <= sqrt(E[phi_1'(eps)^2]), equal for Gaussian returns), with critics aggregated per eps: (B,).

        J is spiky for multimodal returns (large only near the noise that splits the modes), so the one-eps value
        tracks the local width of a mode rather than the spread, and averages need many eps."""
        if reduce not in ("mean", "rms"):
            raise ValueError(f"reduce: expected 'mean' or 'rms', got {reduce!r}")
        b = obs.shape[0]
        eps = randn((b * n_eps,), generator=generator, device=obs.device, dtype=obs.dtype)
        jac = self.returns(
            eps, obs.repeat_interleave(n_eps, 0), act.repeat_interleave(n_eps, 0), target=target, with_jacobian=True
        ).jacobian
        per_eps = aggregate(jac.abs(), agg).reshape(b, n_eps)
        return per_eps.mean(1) if reduce == "mean" else per_eps.square().mean(1).sqrt()

    def sample(self, obs, act, n: int, *, generator: torch.Generator, agg: str = "mean") -> torch.Tensor:
        """n return samples per (s, a) (critics aggregated at a shared eps): (B, n)."""
        b = obs.shape[0]
        eps = randn((b * n,), generator=generator, device=obs.device, dtype=obs.dtype)
        z = self.returns(eps, obs.repeat_interleave(n, 0), act.repeat_interleave(n, 0)).z
        return aggregate(z, agg).reshape(b, n)


class FlowBCPolicy(nn.Module):
    """Behaviour-cloning flow policy: conditional flow matching on the linear path, Euler sampling with the state
    clipped after each step to the `path_envelope` of [-1, 1] with |eps| <= noise_bound (None: to [-1, 1] itself),
    so actions end in [-1, 1]. `sample` makes exactly `num_flow_steps` network calls for any batch."""

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        hidden: Sequence[int] = (128, 128),
        *,
        num_flow_steps: int = 10,
        noise_bound: float | None = 5.0,
    ):
        super().__init__()
        self.act_dim = act_dim
        self.num_flow_steps = num_flow_steps
        self.noise_bound = noise_bound
        self.net = TimeMLP(act_dim, cond_dim=obs_dim, hidden=hidden, layer_norm=True, time_embed_dim=32)
        self.path = AffinePath(CondOT())

    def loss(self, obs: torch.Tensor, actions: torch.Tensor, *, generator: torch.Generator) -> torch.Tensor:
        x0 = randn(actions.shape, generator=generator, device=actions.device, dtype=actions.dtype)
        t = rand((actions.shape[0],), generator=generator, device=actions.device, dtype=actions.dtype)
        ps = self.path.sample(x0, actions, t)
        return flow_matching_loss(self.net(x=ps.x_t, t=ps.t, cond=obs), ps)

    def sample(
        self, obs: torch.Tensor, *, generator: torch.Generator | None = None, noise: torch.Tensor | None = None
    ) -> torch.Tensor:
        """obs: (B, O) -> actions (B, A) in [-1, 1], flowed from `noise` (B, A) or from fresh N(0, I) noise."""
        if noise is None:
            noise = randn((obs.shape[0], self.act_dim), generator=generator, device=obs.device, dtype=obs.dtype)
        grid = grids.uniform(self.num_flow_steps, device=obs.device, dtype=obs.dtype)
        return solve_ode(self.net, noise, grid, method=clipped_euler(-1.0, 1.0, noise_bound=self.noise_bound), cond=obs)


class OneStepPolicy(nn.Module):
    """FQL's one-step policy a = clip(mu(s, eps), -1, 1) with eps ~ N(0, I): one network call per action, trained
    (`loss`) to raise Q while staying close to the BC flow's action from the same eps."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: Sequence[int] = (128, 128)) -> None:
        super().__init__()
        self.act_dim = act_dim
        self.net = MLP(obs_dim + act_dim, act_dim, hidden, layer_norm=True)

    def forward(self, obs: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """The unclipped map mu(s, eps). obs: (B, O), noise: (B, A) -> (B, A)."""
        return self.net(torch.cat([obs, noise], -1))

    def sample(self, obs: torch.Tensor, *, generator: torch.Generator | None) -> torch.Tensor:
        """obs: (B, O) -> actions (B, A) in [-1, 1]."""
        return self(
            obs, randn((obs.shape[0], self.act_dim), generator=generator, device=obs.device, dtype=obs.dtype)
        ).clamp(-1.0, 1.0)

    def loss(
        self,
        obs: torch.Tensor,
        q_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
        bc_policy: FlowBCPolicy,
        *,
        alpha: float,
        normalize_q: bool,
        generator: torch.Generator | None,
    ) -> torch.Tensor:
        """-Q(s, clip(mu)) (divided by the batch's mean |Q| with `normalize_q`) plus
        alpha ||mu(s, eps) - phi_BC(s, eps)||^2 on the unclipped mu (so a saturated output still gets a gradient),
        averaged over the batch. q_fn(obs, actions) -> (B,) must not update the critic (the caller freezes it)."""
        noise = randn((obs.shape[0], self.act_dim), generator=generator, device=obs.device, dtype=obs.dtype)
        with torch.no_grad():
            target = bc_policy.sample(obs, noise=noise)
        mu = self(obs, noise)
        q = q_fn(obs, mu.clamp(-1.0, 1.0))
        q_loss = -q.mean()
        if normalize_q:
            q_loss = q_loss / q.detach().abs().mean().clamp_min(1e-6)
        return q_loss + alpha * (mu - target).square().sum(-1).mean()


def rejection_sample(
    policy: FlowBCPolicy,
    q_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    obs: torch.Tensor,
    *,
    num_samples: int,
    generator: torch.Generator,
) -> torch.Tensor:
    """argmax_Q over `num_samples` BC-flow candidates per observation, all in one (N * num_samples) batch.
    obs: (N, O), q_fn(obs, actions) -> (N * num_samples,) -> actions (N, A)."""
    n = obs.shape[0]
    rep = obs.repeat_interleave(num_samples, 0)
    cand = policy.sample(rep, generator=generator)
    best = q_fn(rep, cand).reshape(n, num_samples).argmax(1)
    return cand.reshape(n, num_samples, -1)[torch.arange(n, device=obs.device), best]


class ScalarCritic(TargetNetwork):
    """K scalar Q networks MLP([s, a]) -> Q: `values` returns (K, B)."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: Sequence[int] = (128, 128), *, n_critics: int = 2):
        super().__init__(nn.ModuleList(MLP(obs_dim + act_dim, 1, hidden, layer_norm=True) for _ in range(n_critics)))

    def values(self, obs, act, *, target: bool = False) -> torch.Tensor:
        x = torch.cat([obs, act], -1)
        return torch.stack([m(x)[:, 0] for m in self.pick(target)])


class C51Critic(TargetNetwork):
    """Categorical return distribution on `n_atoms` evenly spaced atoms over v_range: `logits` (B, n_atoms)."""

    def __init__(self, obs_dim, act_dim, hidden=(128, 128), *, n_atoms: int = 51, v_range: tuple[float, float]):
        super().__init__(MLP(obs_dim + act_dim, n_atoms, hidden, layer_norm=True))
        self.register_buffer("atoms", torch.linspace(v_range[0], v_range[1], n_atoms))

    def logits(self, obs, act, *, target: bool = False) -> torch.Tensor:
        return self.pick(target)(torch.cat([obs, act], -1))

    def sample(self, obs, act, n: int, *, generator: torch.Generator) -> torch.Tensor:
        probs = self.logits(obs, act).softmax(-1)
        return self.atoms[torch.multinomial(probs, n, replacement=True, generator=generator)]


class _QuantileNet(nn.Module):
    def __init__(self, obs_dim, act_dim, hidden, n_cos):
        super().__init__()
        width = hidden[-1]
        self.embed = MLP(obs_dim + act_dim, width, hidden[:-1] or (width,), layer_norm=True)
        self.tau_embed = nn.Linear(n_cos, width)
        self.head = MLP(width, 1, (width,), layer_norm=True)
        self.register_buffer("freqs", math.pi * torch.arange(1, n_cos + 1, dtype=torch.float32))

    def forward(self, x: torch.Tensor, taus: torch.Tensor) -> torch.Tensor:
        b, n = taus.shape
        psi = self.embed(x)[:, None, :]
        phi = torch.relu(self.tau_embed(torch.cos(taus[..., None] * self.freqs)))
        return self.head((psi * phi).reshape(b * n, -1)).reshape(b, n)


class IQNCritic(TargetNetwork):
    """Implicit quantile network Z_tau(s, a) = head(psi(s, a) * relu(W cos(pi i tau))): `quantiles` (B, N)."""

    def __init__(self, obs_dim, act_dim, hidden=(128, 128), *, n_cos: int = 64):
        super().__init__(_QuantileNet(obs_dim, act_dim, tuple(hidden), n_cos))

    def quantiles(self, obs, act, taus, *, target: bool = False) -> torch.Tensor:
        return self.pick(target)(torch.cat([obs, act], -1), taus)

    def sample(self, obs, act, n: int, *, generator: torch.Generator) -> torch.Tensor:
        taus = rand((obs.shape[0], n), generator=generator, device=obs.device, dtype=obs.dtype)
        return self.quantiles(obs, act, taus)
