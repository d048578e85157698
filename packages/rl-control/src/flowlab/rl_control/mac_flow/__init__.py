"""MAC-Flow: a flow-matching behaviour model over all agents' actions (stage 1), distilled into decentralised
one-step policies with a factorised critic's Q term (stage 2); its baselines (joint flow, Gaussian and independent BC,
MA-TD3+BC, DDPM joint BC), the coordination games and MPE simple_spread scenarios, and the latency table."""

from flowlab.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "flowlab.rl_control.mac_flow.agents": ["MARLAgent", "Stage", "train_marl", "with_agent_ids"],
        "flowlab.rl_control.mac_flow.critic": ["FactorisedCritic", "QMixer"],
        "flowlab.rl_control.mac_flow.evaluate": [
            "joint_w2",
            "lipschitz_estimate",
            "measure_latency",
            "mode_weights",
            "product_w2",
            "value_gap",
        ],
        "flowlab.rl_control.mac_flow.joint_flow": ["JointFlowBC"],
        "flowlab.rl_control.mac_flow.learners": ["make_learner"],
        "flowlab.rl_control.mac_flow.model": ["METHODS", "DecentralisedOneStepPolicy", "MACFlow", "MARLConfig"],
    },
)
