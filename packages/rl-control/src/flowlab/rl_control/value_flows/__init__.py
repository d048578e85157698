"""Value Flows: flow-matching distributional critics (return flows with BCFM/DCFM losses, the flow-derivative
spread and confidence weights) with a BC flow actor or FQL's one-step policy, offline and offline-to-online training,
its baselines (C51, IQN, scalar TD) and the chain MDP."""

from flowlab.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "flowlab.rl_control.data": ["OfflineDataset", "load_d4rl", "load_dataset", "load_minari"],
        "flowlab.rl_control.envs.control": [
            "QUALITIES",
            "NoiseSpec",
            "collect",
            "energy_controller",
            "evaluate_policy",
            "make_vector_env",
            "noisy_step",
            "to_box",
        ],
        "flowlab.rl_control.envs.scores": ["REFERENCE_RETURNS", "normalised_return", "score_returns"],
        "flowlab.rl_control.policies": ["FlowBCPolicy", "GymPolicy", "OneStepPolicy", "rejection_sample"],
        "flowlab.rl_control.value_flows.agents": [
            "METHODS",
            "AgentConfig",
            "agent_spaces",
            "load_agent",
            "make_agent",
            "train_agent",
        ],
        "flowlab.rl_control.value_flows.chain": ["ChainMDP", "ChainStep"],
        "flowlab.rl_control.value_flows.evaluate": ["DistributionScores", "distribution_scores"],
        "flowlab.rl_control.value_flows.model": [
            "C51Critic",
            "IQNCritic",
            "ReturnFlow",
            "ReturnFlowCritic",
            "ScalarCritic",
        ],
        "flowlab.rl_control.value_flows.objective": [
            "bcfm_loss",
            "c51_target",
            "confidence_weights",
            "dcfm_loss",
            "quantile_huber_loss",
        ],
        "flowlab.rl_control.value_flows.online": ["OnlineReplay"],
    },
)
