"""`make_learner`: the agent a `MARLConfig` names (MAC-Flow or one of its baselines), built for the data's
dimensions, its initial weights from a seed of its own."""

from __future__ import annotations

from flowlab.core.nets import seeded_init
from flowlab.rl_control.mac_flow.agents import MARLAgent
from flowlab.rl_control.mac_flow.baselines import MATD3BC, DiffusionJointBC, GaussianBC, JointFlowAgent
from flowlab.rl_control.mac_flow.joint_flow import JointFlowBC
from flowlab.rl_control.mac_flow.model import MACFlow, MARLConfig

__all__ = ["make_learner"]


def _build(c: MARLConfig, obs_dim: int, act_dim: int, n_agents: int) -> MARLAgent:
    dims = (obs_dim, act_dim, n_agents)
    if c.method == "mac_flow":
        return MACFlow(c, obs_dim=obs_dim, act_dim=act_dim, n_agents=n_agents)
    if c.method == "joint_flow":
        flow = JointFlowBC(*dims, c.hidden, mode=c.bc_flow, num_flow_steps=c.num_flow_steps, noise_bound=c.noise_bound)
        return JointFlowAgent(flow, lr=c.lr)
    if c.method in ("gaussian_bc", "independent_bc"):
        return GaussianBC(*dims, c.hidden, inputs="joint" if c.method == "gaussian_bc" else "own", lr=c.lr)
    if c.method == "matd3bc":
        return MATD3BC(
            *dims,
            c.hidden,
            lr=c.lr,
            gamma=c.gamma,
            tau=c.tau,
            bc_weight=c.bc_weight,
            policy_noise=c.policy_noise,
            noise_clip=c.noise_clip,
        )
    return DiffusionJointBC(*dims, c.hidden, lr=c.lr, diffusion_steps=c.diffusion_steps)


def make_learner(config: MARLConfig, *, obs_dim: int, act_dim: int, n_agents: int, seed: int | None = None):
    """The `MARLAgent` of `config.method` for `n_agents` agents with observations (obs_dim,) and actions (act_dim,)
    in [-1, 1]. With `seed`, its networks are initialised from that seed alone (torch's global RNG is untouched)."""
    if not isinstance(config, MARLConfig):
        raise ValueError(f"config: expected a MARLConfig, got {type(config).__name__}")
    for name, value in (("obs_dim", obs_dim), ("act_dim", act_dim), ("n_agents", n_agents)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}: expected a positive int, got {value!r}")
    if seed is None:
        return _build(config, obs_dim, act_dim, n_agents)
    with seeded_init(seed):
        return _build(config, obs_dim, act_dim, n_agents)
