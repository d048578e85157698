"""Value Flows: flow-matching distributional critics (return flows with BCFM/DCFM losses, the flow-derivative
spread and confidence weights) with a BC flow actor or FQL's one-step policy, offline and offline-to-online training,
its baselines (C51, IQN, scalar TD) and the chain MDP."""

from flowlab.rl_control.data import OfflineDataset, load_dataset
from flowlab.rl_control.envs.control import (
    QUALITIES,
    NoiseSpec,
    collect,
    energy_controller,
    evaluate_policy,
    make_vector_env,
    noisy_step,
    normalised_return,
)
from flowlab.rl_control.policies import FlowBCPolicy, OneStepPolicy, rejection_sample
from flowlab.rl_control.value_flows.agents import METHODS, AgentConfig, agent_spaces, make_agent, train_agent
from flowlab.rl_control.value_flows.chain import ChainMDP, ChainStep
from flowlab.rl_control.value_flows.evaluate import DistributionScores, distribution_scores
from flowlab.rl_control.value_flows.model import C51Critic, IQNCritic, ReturnFlow, ReturnFlowCritic, ScalarCritic
from flowlab.rl_control.value_flows.objective import (
    bcfm_loss,
    c51_target,
    confidence_weights,
    dcfm_loss,
    quantile_huber_loss,
)
from flowlab.rl_control.value_flows.online import OnlineReplay

__all__ = [
    "METHODS",
    "QUALITIES",
    "AgentConfig",
    "C51Critic",
    "ChainMDP",
    "ChainStep",
    "DistributionScores",
    "FlowBCPolicy",
    "IQNCritic",
    "NoiseSpec",
    "OfflineDataset",
    "OneStepPolicy",
    "OnlineReplay",
    "ReturnFlow",
    "ReturnFlowCritic",
    "ScalarCritic",
    "agent_spaces",
    "bcfm_loss",
    "c51_target",
    "collect",
    "confidence_weights",
    "dcfm_loss",
    "distribution_scores",
    "energy_controller",
    "evaluate_policy",
    "load_dataset",
    "make_agent",
    "make_vector_env",
    "noisy_step",
    "normalised_return",
    "quantile_huber_loss",
    "rejection_sample",
    "train_agent",
]
