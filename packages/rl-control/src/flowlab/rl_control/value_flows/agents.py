"""Agents sharing one interface and data pipeline: Value Flows (and its ablations), C51, IQN and a scalar TD critic,
each with the same behaviour-cloning flow actor and rejection-sampling policy extraction; `train_agent` runs
`flowlab.core.train.fit` with a Polyak target update after every step; `load_agent` reads a trained run folder."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch
from torch import nn

from flowlab.core.config import Config
from flowlab.core.distributions import rand, randn
from flowlab.core.nets import seeded_init
from flowlab.core.train import fit, load_checkpoint
from flowlab.core.train.loop import FitResult
from flowlab.rl_control.data import OfflineDataset
from flowlab.rl_control.networks import aggregate, frozen
from flowlab.rl_control.policies import FlowBCPolicy, OneStepPolicy, rejection_sample
from flowlab.rl_control.value_flows.model import C51Critic, IQNCritic, ReturnFlowCritic, ScalarCritic
from flowlab.rl_control.value_flows.names import METHODS, Method
from flowlab.rl_control.value_flows.objective import (
    bcfm_loss,
    c51_target,
    confidence_weights,
    dcfm_loss,
    quantile_huber_loss,
)
from flowlab.rl_control.value_flows.online import OnlineReplay

__all__ = ["METHODS", "AgentConfig", "agent_spaces", "load_agent", "make_agent", "train_agent"]


@dataclass(frozen=True)
class AgentConfig(Config):
    """The settings of every agent: what `flowlab rl train` and the benchmarks choose. The data's dimensions and
    reward range are given to `make_agent` beside it. Returns are clipped to `v_range`, by default
    [r_min / (1 - gamma), r_max / (1 - gamma)] of the (normalised) training rewards' range; flows (critic and actor)
    clip their Euler states to the linear path's envelope between noise |eps| <= `noise_bound` and that range (None:
    to the range at every step, which clamps noise outside it at the first step).

    `next_action`: "policy" (the agent's own action at s', the control setting) or "dataset" (the batch's
    next_actions: policy evaluation, no actor is trained). `policy_extraction`: "rejection" (argmax_Q over
    `num_action_samples` BC-flow actions) or "onestep" (FQL's distilled one-step policy; `alpha` weights its
    distillation to the BC flow and `normalize_q_loss` divides its Q term by the batch mean |Q|).

    `dcfm_scale_gamma` (default) regresses DCFM onto gamma v'(z'_t, t), the velocity of the pushed-forward flow
    r + gamma phi'_t, exact for deterministic rewards and point-mass returns; False is the reference code's unscaled
    target, off by a factor 1/gamma there (see `dcfm_loss`). With random rewards neither form has the return law as
    its fixed point. `kappa`: IQN's Huber threshold, in return units."""

    method: Method = "value_flows"
    gamma: float = 0.99
    v_range: tuple[float, float] | None = None
    hidden: tuple[int, ...] = (128, 128)
    lr: float = 3e-4
    tau: float = 0.005
    num_flow_steps: int = 10
    num_action_samples: int = 16
    noise_bound: float | None = 5.0
    policy_extraction: Literal["rejection", "onestep"] = "rejection"
    alpha: float = 10.0
    normalize_q_loss: bool = False
    next_action: Literal["policy", "dataset"] = "policy"
    # Value Flows
    n_critics: int = 2
    conf_temp: float = 0.3
    use_confidence: bool = True
    lambda_b: float = 1.0
    lambda_d: float = 1.0
    q_agg: Literal["mean", "min"] = "mean"
    ret_agg: Literal["mean", "min"] = "mean"
    jacobian_mode: Literal["jvp", "vjp"] = "vjp"
    dcfm_scale_gamma: bool = True
    # baselines
    n_atoms: int = 51
    n_quantiles: int = 32
    kappa: float = 1.0
    n_cos: int = 64

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0 <= self.gamma < 1:
            raise ValueError(f"gamma: expected a value in [0, 1), got {self.gamma}")
        if self.alpha < 0:
            raise ValueError(f"alpha: expected a non-negative distillation weight, got {self.alpha}")
        if not self.kappa > 0:
            raise ValueError(f"kappa: expected a positive Huber threshold, got {self.kappa}")
        if self.noise_bound is not None and not (math.isfinite(self.noise_bound) and self.noise_bound >= 0):
            raise ValueError(f"noise_bound: expected None or a finite number >= 0, got {self.noise_bound}")
        if self.policy_extraction == "onestep" and self.next_action == "dataset":
            raise ValueError("policy_extraction: 'onestep' needs next_action='policy' (no actor is trained otherwise)")
        if self.lambda_b < 0 or self.lambda_d < 0 or self.lambda_b + self.lambda_d == 0:
            raise ValueError("lambda_b, lambda_d: expected non-negative weights, not both zero")

    def return_range(self, reward_range: tuple[float, float]) -> tuple[float, float]:
        """The returns' clip range for rewards in `reward_range` = (r_min, r_max): `v_range`, or
        [r_min / (1 - gamma), r_max / (1 - gamma)] widened to at least 1e-3."""
        if self.v_range is not None:
            return self.v_range
        r_min, r_max = reward_range
        return r_min / (1 - self.gamma), max(r_max / (1 - self.gamma), r_min / (1 - self.gamma) + 1e-3)


class _Agent(nn.Module):
    """Shared pieces: the BC flow actor, the optional one-step policy, next actions, acting. `obs_dim`, `act_dim`
    and `reward_range` (r_min, r_max of the normalised training rewards) describe the data; `return_range` is the
    returns' clip range they give (`AgentConfig.return_range`)."""

    def __init__(self, config: AgentConfig, obs_dim: int, act_dim: int, reward_range: tuple[float, float]) -> None:
        super().__init__()
        self.config = config
        self.obs_dim, self.act_dim, self.reward_range = obs_dim, act_dim, reward_range
        self.return_range = config.return_range(reward_range)
        self.actor = FlowBCPolicy(
            obs_dim,
            act_dim,
            config.hidden,
            num_flow_steps=config.num_flow_steps,
            noise_bound=config.noise_bound,
        )
        onestep = config.policy_extraction == "onestep"
        self.onestep = OneStepPolicy(obs_dim, act_dim, config.hidden) if onestep else None

    def q(self, obs, act, *, generator, target: bool = False) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    @torch.no_grad()
    def act(self, obs: torch.Tensor, *, generator: torch.Generator) -> torch.Tensor:
        """Actions (N, A) for N observations: the one-step policy (one network call), or argmax_Q over
        `num_action_samples` BC-flow candidates each (one batched network call per flow step)."""
        if self.onestep is not None:
            return self.onestep.sample(obs, generator=generator)
        return rejection_sample(
            self.actor,
            lambda o, a: self.q(o, a, generator=generator),
            obs,
            num_samples=self.config.num_action_samples,
            generator=generator,
        )

    def next_actions(self, batch, generator) -> torch.Tensor:
        if self.config.next_action == "dataset":
            if "next_actions" not in batch:
                raise ValueError("batch: next_action='dataset' needs next_actions in the dataset")
            return batch["next_actions"]
        return self.act(batch["next_obs"], generator=generator)

    def actor_loss(self, batch, generator) -> torch.Tensor:
        """BC flow matching, plus the one-step policy's loss against the frozen critic when it is used."""
        if self.config.next_action == "dataset":
            return batch["obs"].new_zeros(())
        loss = self.actor.loss(batch["obs"], batch["actions"], generator=generator)
        if self.onestep is not None:
            c = self.config
            with frozen(self.critic):
                loss = loss + self.onestep.loss(
                    batch["obs"],
                    lambda o, a: self.q(o, a, generator=generator),
                    self.actor,
                    alpha=c.alpha,
                    normalize_q=c.normalize_q_loss,
                    generator=generator,
                )
        return loss

    def update_target(self) -> None:
        self.critic.update_target(self.config.tau)

    def loss(self, batch, generator) -> tuple[torch.Tensor, dict]:
        critic, logs = self.critic_loss(batch, generator)
        actor = self.actor_loss(batch, generator)
        return critic + actor, {**logs, "actor_loss": actor.detach()}


class ValueFlowsAgent(_Agent):
    """Value Flows: return-flow critics trained with confidence-weighted BCFM + DCFM."""

    def __init__(self, config: AgentConfig, *spaces) -> None:
        super().__init__(config, *spaces)
        self.critic = ReturnFlowCritic(
            self.obs_dim,
            self.act_dim,
            config.hidden,
            n_critics=config.n_critics,
            num_flow_steps=config.num_flow_steps,
            v_range=self.return_range,
            jacobian_mode=config.jacobian_mode,
            noise_bound=config.noise_bound,
        )

    def q(self, obs, act, *, generator, target: bool = False) -> torch.Tensor:
        return self.critic.q(obs, act, generator=generator, agg=self.config.q_agg, target=target)

    def sample_returns(self, obs, act, n: int, *, generator) -> torch.Tensor:
        return self.critic.sample(obs, act, n, generator=generator, agg=self.config.ret_agg)

    def spread(self, obs, act, *, generator, n_eps: int = 1, reduce: str = "mean") -> torch.Tensor:
        """The online critics' flow-derivative spread (see `ReturnFlowCritic.spread`): (B,)."""
        c = self.config
        return self.critic.spread(obs, act, generator=generator, agg=c.q_agg, target=False, n_eps=n_eps, reduce=reduce)

    def critic_loss(self, batch, generator):
        c = self.config
        obs, act, r, obs2, mask = batch["obs"], batch["actions"], batch["rewards"], batch["next_obs"], batch["masks"]
        b = obs.shape[0]
        eps = randn((b,), generator=generator, device=obs.device, dtype=obs.dtype)
        t = rand((b,), generator=generator, device=obs.device, dtype=obs.dtype)
        with torch.no_grad():
            act2 = self.next_actions(batch, generator)
            # one batched target integration for phi_1 and phi_t at (s', a'); the spread at (s, a) separately
            flows = self.critic.returns(
                torch.cat([eps, eps]),
                torch.cat([obs2, obs2]),
                torch.cat([act2, act2]),
                end_t=torch.cat([torch.ones_like(t), t]),
                target=True,
            )
            next_ret = aggregate(flows.z[:, :b], c.ret_agg)
            returns = r + c.gamma * mask * next_ret
            next_z_t = aggregate(flows.z[:, b:], c.ret_agg)
            if c.use_confidence:
                # the spread's own noise: a weight that depends on the BCFM sample's eps would reweight the
                # regression within each (s, a) and bias the learned field (the reference code draws it separately)
                eps_spread = randn((b,), generator=generator, device=obs.device, dtype=obs.dtype)
                jac = self.critic.returns(eps_spread, obs, act, target=True, with_jacobian=True).jacobian
                spread = aggregate(jac.abs(), c.q_agg)
                w = confidence_weights(spread, c.conf_temp)
            else:
                spread, w = torch.ones_like(t), torch.ones_like(t)
            next_v = (
                aggregate(self.critic.velocity(next_z_t, t, obs2, act2, target=True), c.ret_agg) if c.lambda_d else None
            )

        def velocity_fn(z, tt):
            return self.critic.velocity(z, tt, obs, act)

        total = torch.zeros_like(t)
        logs = {}
        if c.lambda_b:
            lb = bcfm_loss(velocity_fn, eps, t, returns)
            total = total + c.lambda_b * lb
            logs["bcfm"] = lb.mean().detach()
        if c.lambda_d:
            ld = dcfm_loss(velocity_fn, r, mask, c.gamma, t, next_z_t, next_v, scale_target=c.dcfm_scale_gamma)
            total = total + c.lambda_d * ld
            logs["dcfm"] = ld.mean().detach()
        logs.update(weight=w.mean(), spread=spread.mean())
        return (w * total).mean(), logs


class TDAgent(_Agent):
    """Scalar TD critic (twin Q, mean aggregation) with the same actor: Q <- r + gamma mask Q_target(s', a')."""

    def __init__(self, config: AgentConfig, *spaces) -> None:
        super().__init__(config, *spaces)
        self.critic = ScalarCritic(self.obs_dim, self.act_dim, config.hidden, n_critics=config.n_critics)

    def q(self, obs, act, *, generator, target: bool = False) -> torch.Tensor:
        lo, hi = self.return_range
        return aggregate(self.critic.values(obs, act, target=target), self.config.q_agg).clamp(lo, hi)

    def critic_loss(self, batch, generator):
        c = self.config
        with torch.no_grad():
            act2 = self.next_actions(batch, generator)
            y = batch["rewards"] + c.gamma * batch["masks"] * self.q(
                batch["next_obs"], act2, generator=generator, target=True
            )
        q = self.critic.values(batch["obs"], batch["actions"])
        return (q - y).square().sum(0).mean(), {"q": q.mean().detach()}


class C51Agent(_Agent):
    """C51: categorical critic on `n_atoms` atoms over the return range, projected Bellman target, cross-entropy."""

    def __init__(self, config: AgentConfig, *spaces) -> None:
        super().__init__(config, *spaces)
        self.critic = C51Critic(
            self.obs_dim, self.act_dim, config.hidden, n_atoms=config.n_atoms, v_range=self.return_range
        )

    def q(self, obs, act, *, generator, target: bool = False) -> torch.Tensor:
        return self.critic.logits(obs, act, target=target).softmax(-1) @ self.critic.atoms

    def sample_returns(self, obs, act, n: int, *, generator) -> torch.Tensor:
        return self.critic.sample(obs, act, n, generator=generator)

    def critic_loss(self, batch, generator):
        c = self.config
        with torch.no_grad():
            act2 = self.next_actions(batch, generator)
            p2 = self.critic.logits(batch["next_obs"], act2, target=True).softmax(-1)
            target = c51_target(self.critic.atoms, p2, batch["rewards"], batch["masks"], c.gamma)
        logp = self.critic.logits(batch["obs"], batch["actions"]).log_softmax(-1)
        return -(target * logp).sum(-1).mean(), {}


class IQNAgent(_Agent):
    """IQN: quantile-Huber TD on `n_quantiles` sampled levels with a cosine embedding of tau."""

    def __init__(self, config: AgentConfig, *spaces) -> None:
        super().__init__(config, *spaces)
        self.critic = IQNCritic(self.obs_dim, self.act_dim, config.hidden, n_cos=config.n_cos)

    def q(self, obs, act, *, generator, target: bool = False) -> torch.Tensor:
        taus = rand((obs.shape[0], self.config.n_quantiles), generator=generator, device=obs.device, dtype=obs.dtype)
        return self.critic.quantiles(obs, act, taus, target=target).mean(1)

    def sample_returns(self, obs, act, n: int, *, generator) -> torch.Tensor:
        return self.critic.sample(obs, act, n, generator=generator)

    def critic_loss(self, batch, generator):
        c = self.config
        b, n = batch["obs"].shape[0], c.n_quantiles
        with torch.no_grad():
            act2 = self.next_actions(batch, generator)
            taus2 = rand((b, n), generator=generator, device=batch["obs"].device, dtype=batch["obs"].dtype)
            z2 = self.critic.quantiles(batch["next_obs"], act2, taus2, target=True).clamp(*self.return_range)
            target = batch["rewards"][:, None] + c.gamma * batch["masks"][:, None] * z2
        taus = rand((b, n), generator=generator, device=batch["obs"].device, dtype=batch["obs"].dtype)
        pred = self.critic.quantiles(batch["obs"], batch["actions"], taus)
        return quantile_huber_loss(pred, taus, target, kappa=c.kappa).mean(), {}


_AGENTS = {"value_flows": ValueFlowsAgent, "c51": C51Agent, "iqn": IQNAgent, "td": TDAgent}


def make_agent(
    config: AgentConfig,
    *,
    obs_dim: int,
    act_dim: int,
    reward_range: tuple[float, float],
    seed: int | None = None,
) -> _Agent:
    """Build the agent named by `config.method` for observations (obs_dim,), actions (act_dim,) in [-1, 1] and
    training rewards in `reward_range` = (r_min, r_max). With `seed`, its networks are initialised from that seed
    alone (independent of earlier draws from torch's global RNG, which is left untouched)."""
    if not isinstance(config, AgentConfig):
        raise ValueError(f"config: expected an AgentConfig, got {type(config).__name__}")
    for name, dim in (("obs_dim", obs_dim), ("act_dim", act_dim)):
        if not isinstance(dim, int) or dim < 1:
            raise ValueError(f"{name}: expected a positive int, got {dim!r}")
    r_min, r_max = (float(r) for r in reward_range)
    if not r_min <= r_max:
        raise ValueError(f"reward_range: expected (r_min, r_max) with r_min <= r_max, got {reward_range}")
    spaces = (obs_dim, act_dim, (r_min, r_max))
    if seed is None:
        return _AGENTS[config.method](config, *spaces)
    with seeded_init(seed):
        return _AGENTS[config.method](config, *spaces)


def agent_spaces(agent: _Agent) -> dict[str, Any]:
    """What `make_agent` needs beside the config to rebuild `agent`, JSON-ready: obs_dim, act_dim, reward_range."""
    return {"obs_dim": agent.obs_dim, "act_dim": agent.act_dim, "reward_range": list(agent.reward_range)}


def load_agent(run: str | os.PathLike[str], *, device: torch.device | str = "cpu") -> tuple[_Agent, dict[str, Any]]:
    """The agent `flowlab rl train` trained into the folder `run` (its fine-tuned weights after an online phase),
    loaded with `torch.load(weights_only=True)` onto `device`, and the run's record (run.json: env, agent, spaces,
    reward_scale, ...). A missing or unreadable run is a `run: ...` error naming the file."""
    run = Path(run)
    record = run / "run.json"
    if not record.is_file():
        raise FileNotFoundError(f"run: {record} not found (train with `flowlab rl train --out {run}` first)")
    try:
        meta = json.loads(record.read_text())
        agent = make_agent(AgentConfig.from_mapping(meta["agent"]), **meta["spaces"])
        if not isinstance(meta["env"], str):
            raise TypeError(f"env: expected a name, got {meta['env']!r}")
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"run: {record} is not a run of `flowlab rl train` ({type(err).__name__}: {err})") from None
    try:
        load_checkpoint(run / "online" if meta.get("online") else run, model=agent, device=device, restore_rng=False)
    except (ValueError, FileNotFoundError) as err:  # also weights of other shapes than the agent's
        raise ValueError(f"run: {str(err).removeprefix('path: ')} (the agent {record} describes)") from None
    return agent.to(device), meta


def train_agent(
    agent: _Agent,
    dataset: OfflineDataset | OnlineReplay,
    *,
    steps: int,
    batch_size: int = 256,
    reward_scale: float = 1.0,
    generator: torch.Generator,
    device: torch.device | str = "cpu",
    ckpt_dir: str | os.PathLike[str] | None = None,
    progress: bool = False,
    callbacks: tuple[Callable, ...] = (),
    log_every: int = 500,
    lr_schedule: str = "constant",
) -> FitResult:
    """Training with `flowlab.core.train.fit` (Adam, lr from the config, held "constant" or annealed to 0 over
    `steps` by a "cosine" schedule), the target networks updated by Polyak averaging after each step. `dataset`: an
    offline dataset, or an `OnlineReplay` for offline-to-online fine-tuning (one environment step per batch)."""
    if isinstance(dataset, OfflineDataset):
        dataset.check_agents(None)
    if dataset.obs_dim != agent.obs_dim or dataset.act_dim != agent.act_dim:
        raise ValueError(
            f"dataset: dims (obs {dataset.obs_dim}, act {dataset.act_dim}) do not match the agent's "
            f"(obs {agent.obs_dim}, act {agent.act_dim})"
        )
    agent.to(device)
    params = [p for p in agent.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=agent.config.lr)
    if lr_schedule not in ("constant", "cosine"):
        raise ValueError(f"lr_schedule: expected 'constant' or 'cosine', got {lr_schedule!r}")
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps) if lr_schedule == "cosine" else None
    return fit(
        agent,
        lambda model, batch, gen: model.loss(batch, gen),
        dataset.sampler(batch_size, device=device, reward_scale=reward_scale),
        steps=steps,
        optimizer=opt,
        lr_schedule=sched,
        grad_clip=10.0,
        ckpt_dir=ckpt_dir,
        ckpt_every=max(steps, 1),
        device=device,
        generator=generator,
        callbacks=(lambda info: agent.update_target(), *callbacks),
        log_every=min(log_every, steps),
        progress=progress,
        config={
            "agent": agent.config.to_dict(),
            "spaces": agent_spaces(agent),
            "reward_scale": reward_scale,
            "lr_schedule": lr_schedule,
        },
    )
