"""Molecular generation and Boltzmann sampling on the FlowLab core."""

__version__ = "0.1.0"
