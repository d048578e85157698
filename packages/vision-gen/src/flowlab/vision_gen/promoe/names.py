"""The names the `flowlab vision promoe` options list (light: imported by the CLI before torch)."""

#: the model variants: ProMoE, its baselines (dense DiT, token-choice and expert-choice MoE) and its ablations
VARIANTS = (
    "promoe",
    "dense",
    "tc",
    "ec",
    "promoe_no_rcl",
    "promoe_no_cond",
    "promoe_softmax",
    "promoe_sigmoid",
)
#: the training objectives: rectified flow (velocity, logit-normal t) or DDPM (epsilon on a discrete schedule)
OBJECTIVES = ("rf", "ddpm")
#: the router activations of ProMoE's prototypical routing (the paper's choice: identity, the raw cosine as gate)
ACTIVATIONS = ("identity", "softmax", "sigmoid")
