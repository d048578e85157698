"""Samplers: fixed-step and adaptive ODE solvers with inversion, Euler-Maruyama SDEs, the EDM sampler, manifold
ODEs and flow-map sampling. Solvers of one family share one signature, so swapping a sampler is one word."""

from flowlab.core.solvers.adaptive import ADAPTIVE_METHODS, AdaptiveSolution, solve_ode_adaptive
from flowlab.core.solvers.edm import edm_sample
from flowlab.core.solvers.flowmap import sample_flow_map
from flowlab.core.solvers.manifold import MANIFOLD_METHODS, solve_ode_on_manifold
from flowlab.core.solvers.ode import invert_ode, solve_ode
from flowlab.core.solvers.sde import Diffusion, solve_sde, velocity_to_sde_drift
from flowlab.core.solvers.steppers import STEPPERS, JVPState, Stepper, euler, heun, jvp_euler, midpoint, rk4
from flowlab.core.solvers.trajectory import StepInfo, Trajectory

__all__ = [
    "ADAPTIVE_METHODS",
    "MANIFOLD_METHODS",
    "STEPPERS",
    "AdaptiveSolution",
    "Diffusion",
    "JVPState",
    "StepInfo",
    "Stepper",
    "Trajectory",
    "edm_sample",
    "euler",
    "heun",
    "invert_ode",
    "jvp_euler",
    "midpoint",
    "rk4",
    "sample_flow_map",
    "solve_ode",
    "solve_ode_adaptive",
    "solve_ode_on_manifold",
    "solve_sde",
    "velocity_to_sde_drift",
]
