"""Diffusion joint-likelihood certificates of trust for scientific regression."""

__version__ = "0.1.0"
