"""Samplers: fixed-step and adaptive ODE solvers with inversion, Euler-Maruyama SDEs, the EDM sampler, manifold
ODEs, bridge models from a given start, flow-map and multistep consistency sampling, DDIM / DPM-Solver++ diffusion
sampling with inversion, and CTMC sampling of discrete paths; Euler steppers clipped to a range. Solvers of one
family share one signature, so swapping a sampler is one word."""

from flowlab.core.solvers.adaptive import ADAPTIVE_METHODS, AdaptiveSolution, solve_ode_adaptive
from flowlab.core.solvers.bridge import sample_bridge
from flowlab.core.solvers.clipped import clipped_euler, clipped_jvp_euler, path_envelope, scalar_vjp_euler
from flowlab.core.solvers.consistency import consistency_sample
from flowlab.core.solvers.ctmc import solve_ctmc
from flowlab.core.solvers.diffusion import (
    Inversion,
    MultistepHistory,
    ddim_step,
    ddpm_step,
    dpmpp_step,
    invert,
    sample_diffusion,
)
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
    "Inversion",
    "JVPState",
    "MultistepHistory",
    "StepInfo",
    "Stepper",
    "Trajectory",
    "clipped_euler",
    "clipped_jvp_euler",
    "consistency_sample",
    "ddim_step",
    "ddpm_step",
    "dpmpp_step",
    "edm_sample",
    "euler",
    "heun",
    "invert",
    "invert_ode",
    "jvp_euler",
    "midpoint",
    "path_envelope",
    "rk4",
    "sample_bridge",
    "sample_diffusion",
    "sample_flow_map",
    "scalar_vjp_euler",
    "solve_ctmc",
    "solve_ode",
    "solve_ode_adaptive",
    "solve_ode_on_manifold",
    "solve_sde",
    "velocity_to_sde_drift",
]
