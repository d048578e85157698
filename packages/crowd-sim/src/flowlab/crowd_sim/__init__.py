"""Crowd simulation with conditional diffusion on the FlowLab core."""

__version__ = "0.1.0"
