"""Critics: the return-flow critic of Value Flows and the C51, IQN and scalar critics of the baselines. Every critic
keeps a Polyak-averaged target copy (`update_target`); the actors are the package's shared `policies`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from flowlab.core import grids
from flowlab.core.distributions import rand, randn
from flowlab.core.nets import MLP, TimeMLP
from flowlab.core.solvers import JVPState, clipped_euler, clipped_jvp_euler, solve_ode
from flowlab.rl_control.networks import TargetNetwork, aggregate

__all__ = ["C51Critic", "IQNCritic", "ReturnFlow", "ReturnFlowCritic", "ScalarCritic"]


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


class ScalarCritic(TargetNetwork):
    """K scalar Q networks MLP([s, a]) -> Q: `values` returns (K, B)."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: Sequence[int] = (128, 128), *, n_critics: int = 2):
        super().__init__(nn.ModuleList(MLP(obs_dim + act_dim, 1, hidden, layer_norm=True) for _ in range(n_critics)))

    def values(self, obs, act, *, target: bool = False) -> torch.Tensor:
        """The K Q-values: obs: (B, O), act: (B, A) -> (K, B), from the target networks when `target` is true."""
        x = torch.cat([obs, act], -1)
        return torch.stack([m(x)[:, 0] for m in self.pick(target)])


class C51Critic(TargetNetwork):
    """Categorical return distribution on `n_atoms` evenly spaced atoms over v_range: `logits` (B, n_atoms)."""

    def __init__(self, obs_dim, act_dim, hidden=(128, 128), *, n_atoms: int = 51, v_range: tuple[float, float]):
        super().__init__(MLP(obs_dim + act_dim, n_atoms, hidden, layer_norm=True))
        self.register_buffer("atoms", torch.linspace(v_range[0], v_range[1], n_atoms))

    def logits(self, obs, act, *, target: bool = False) -> torch.Tensor:
        """The return distribution's logits: obs: (B, O), act: (B, A) -> (B, n_atoms), from the target network when
        `target` is true."""
        return self.pick(target)(torch.cat([obs, act], -1))

    def sample(self, obs, act, n: int, *, generator: torch.Generator) -> torch.Tensor:
        """`n` returns per pair drawn from the online distribution's atoms: obs: (B, O), act: (B, A) -> (B, n)."""
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
        """The return quantiles at `taus`: obs: (B, O), act: (B, A), taus: (B, N) -> (B, N), from the target network
        when `target` is true."""
        return self.pick(target)(torch.cat([obs, act], -1), taus)

    def sample(self, obs, act, n: int, *, generator: torch.Generator) -> torch.Tensor:
        """`n` returns per pair, the online quantiles at uniform random levels: obs: (B, O), act: (B, A) -> (B, n)."""
        taus = rand((obs.shape[0], n), generator=generator, device=obs.device, dtype=obs.dtype)
        return self.quantiles(obs, act, taus)
