"""Samplers: fixed-step and adaptive ODE solvers with inversion, Euler-Maruyama SDEs, the EDM sampler, manifold
ODEs, bridge models from a given start, flow-map and multistep consistency sampling, DDIM / DPM-Solver++ diffusion
sampling with inversion, and CTMC sampling of discrete paths; Euler steppers clipped to a range. Solvers of one
family share one signature, so swapping a sampler is one word."""

from flowlab.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "flowlab.core.solvers.adaptive": ["ADAPTIVE_METHODS", "AdaptiveSolution", "solve_ode_adaptive"],
        "flowlab.core.solvers.bridge": ["sample_bridge"],
        "flowlab.core.solvers.clipped": ["clipped_euler", "clipped_jvp_euler", "path_envelope", "scalar_vjp_euler"],
        "flowlab.core.solvers.consistency": ["consistency_sample"],
        "flowlab.core.solvers.ctmc": ["ctmc_step", "jump_probabilities", "solve_ctmc"],
        "flowlab.core.solvers.diffusion": [
            "Inversion",
            "MultistepHistory",
            "ddim_step",
            "ddpm_step",
            "dpmpp_step",
            "invert",
            "sample_diffusion",
        ],
        "flowlab.core.solvers.edm": ["edm_sample"],
        "flowlab.core.solvers.flowmap": ["sample_flow_map"],
        "flowlab.core.solvers.manifold": ["MANIFOLD_METHODS", "solve_ode_on_manifold"],
        "flowlab.core.solvers.ode": ["invert_ode", "solve_ode"],
        "flowlab.core.solvers.sde": ["Diffusion", "solve_sde", "velocity_to_sde_drift"],
        "flowlab.core.solvers.steppers": [
            "STEPPERS",
            "JVPState",
            "Stepper",
            "euler",
            "heun",
            "jvp_euler",
            "midpoint",
            "rk4",
        ],
        "flowlab.core.solvers.trajectory": ["StepInfo", "Trajectory"],
    },
)
