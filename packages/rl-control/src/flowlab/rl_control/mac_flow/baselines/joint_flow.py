"""The undistilled joint flow (MAC-Flow's stage 1 alone) as an agent: centralised execution, `num_flow_steps` network
calls per joint action. The coordination upper bound MAC-Flow distils from."""

from __future__ import annotations

import torch
from torch import nn

from flowlab.rl_control.mac_flow.agents import MARLAgent, Stage
from flowlab.rl_control.mac_flow.joint_flow import JointFlowBC
from flowlab.rl_control.mac_flow.objective import FlowBCObjective

__all__ = ["JointFlowAgent"]


class JointFlowAgent(MARLAgent):
    """Acts by integrating `flow` (a `JointFlowBC`) from fresh noise; trains it in one stage "bc" at `lr`."""

    def __init__(self, flow: JointFlowBC, *, lr: float) -> None:
        super().__init__(flow.obs_dim, flow.act_dim, flow.n_agents)
        self.flow, self.lr = flow, lr

    def stages(self) -> tuple[Stage, ...]:
        """One stage, "bc": the flow's flow-matching loss at `lr`."""
        return (Stage("bc", FlowBCObjective(self.flow), self.lr),)

    @property
    def act_network(self) -> nn.Module:
        """The joint flow's velocity network, called once per integration step."""
        return self.flow.flow.net

    def _act(self, obs: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        return self.flow.sample(obs, generator=generator)
