"""EnvSocial-Diff's ablations (the branches each one switches on) and residual samplers, kept free of heavy imports so
that the command line can offer them cheaply."""

__all__ = ["ABLATIONS", "GOALS", "SAMPLERS"]

ABLATIONS = {
    "full": {"obstacles": True, "interests": True, "lighting": True, "similarity": True},
    "no_env": {"obstacles": False, "interests": False, "lighting": False, "similarity": True},
    "obstacles": {"obstacles": True, "interests": False, "lighting": False, "similarity": True},
    "ooi": {"obstacles": True, "interests": True, "lighting": False, "similarity": True},
    "lighting": {"obstacles": True, "interests": True, "lighting": True, "similarity": True},
    "no_sim": {"obstacles": True, "interests": True, "lighting": True, "similarity": False},
    "spdiff": {"obstacles": False, "interests": False, "lighting": False, "similarity": False},
}

#: the residual samplers: ancestral DDPM over the training steps, or DDIM on a shorter grid
SAMPLERS = ("ddpm", "ddim")

#: the goal models (`goals`): each track's recorded last point, or constant-velocity goals from the last observation
GOALS = ("recorded", "constant_velocity")
