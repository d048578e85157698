"""MAC-Flow: a flow-matching behaviour model over all agents' actions (stage 1), distilled into decentralised
one-step policies with a factorised critic's Q term (stage 2); its baselines (joint flow, Gaussian and independent BC,
MA-TD3+BC, DDPM joint BC), the coordination games and MPE simple_spread scenarios, and the latency table."""

from flowlab.rl_control.mac_flow.agents import MARLAgent, Stage, train_marl, with_agent_ids
from flowlab.rl_control.mac_flow.critic import FactorisedCritic, QMixer
from flowlab.rl_control.mac_flow.evaluate import (
    joint_w2,
    lipschitz_estimate,
    measure_latency,
    mode_weights,
    product_w2,
    value_gap,
)
from flowlab.rl_control.mac_flow.joint_flow import JointFlowBC
from flowlab.rl_control.mac_flow.learners import make_learner
from flowlab.rl_control.mac_flow.model import METHODS, DecentralisedOneStepPolicy, MACFlow, MARLConfig

__all__ = [
    "METHODS",
    "DecentralisedOneStepPolicy",
    "FactorisedCritic",
    "JointFlowBC",
    "MACFlow",
    "MARLAgent",
    "MARLConfig",
    "QMixer",
    "Stage",
    "joint_w2",
    "lipschitz_estimate",
    "make_learner",
    "measure_latency",
    "mode_weights",
    "product_w2",
    "train_marl",
    "value_gap",
    "with_agent_ids",
]
