"""The shared diffusion/flow engine: paths, losses, solvers, likelihood, flow maps, manifolds, nets, training, benchmark protocol."""

__version__ = "0.1.0"
