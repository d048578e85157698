"""The names the `flowlab vision patronus` options list (light: imported by the CLI before torch)."""

#: the conditioned models: Patronus (prototype activations) and the DiffAE-style baseline (a global latent code)
VARIANTS = ("patronus", "diffae")
#: what `flowlab vision patronus explain` can draw
EXPLANATIONS = ("prototypes", "where", "when", "manipulate")
#: how the prototypes start: U(0, 1) (the official init) or the features of random training patches
PROTO_INITS = ("uniform", "patches")
