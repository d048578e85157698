"""The shared diffusion/flow engine: schedules, paths, couplings, losses, solvers, likelihood, flow maps, manifolds,
nets, training and the benchmark protocol."""

__version__ = "0.1.0"
