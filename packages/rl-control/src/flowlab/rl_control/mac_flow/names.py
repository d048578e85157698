"""The method names of MAC-Flow and its baselines, kept free of heavy imports for the `flowlab rl` CLI."""

from typing import Literal, get_args

__all__ = ["METHODS", "Method"]

Method = Literal["mac_flow", "joint_flow", "gaussian_bc", "independent_bc", "matd3bc", "diffusion_bc"]
METHODS: tuple[str, ...] = get_args(Method)
