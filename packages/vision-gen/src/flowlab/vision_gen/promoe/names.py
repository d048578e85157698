"""The names the `flowlab vision promoe` options list (light: imported by the CLI before torch)."""

#: the model variants: ProMoE, its baselines (dense DiT, token-choice, expert-choice MoE, DiffMoE-lite) and its
#: ablations
VARIANTS = (
    "promoe",
    "dense",
    "tc",
    "ec",
    "diffmoe",
    "promoe_no_rcl",
    "promoe_no_cond",
    "promoe_softmax",
    "promoe_sigmoid",
    "promoe_no_shared",
    "promoe_kmeans",
)
#: the training objectives: rectified flow (velocity, logit-normal t) or DDPM (epsilon on a discrete schedule)
OBJECTIVES = ("rf", "ddpm")
#: the router activations of ProMoE's prototypical routing (the paper's choice: identity, the raw cosine as gate)
ACTIVATIONS = ("identity", "softmax", "sigmoid")
