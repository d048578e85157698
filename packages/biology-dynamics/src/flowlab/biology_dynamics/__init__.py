"""Unbalanced single-cell dynamics and simplicial diffusion on the FlowLab core."""

__version__ = "0.1.0"
