"""Diffusion joint-likelihood certificates of trust for scientific regression (`certificate`: JLBC)."""

__version__ = "0.1.0"
