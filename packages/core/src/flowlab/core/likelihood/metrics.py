"""Likelihood units: bits per dimension."""

from __future__ import annotations

import math

import torch

from flowlab.core.validation import check_tensor

__all__ = ["bits_per_dim"]


def bits_per_dim(log_p: torch.Tensor, num_dims: int, *, dequantization_offset: float = 0.0) -> torch.Tensor:
    """Negative log-likelihood per dimension in bits: (-log_p / num_dims + dequantization_offset) / ln 2.

    log_p: (B,) or any shape, natural-log densities of whole samples; num_dims: dimensions per sample.
    dequantization_offset: nats per dimension added for the change of scale from discrete data, e.g. log(256) for
    8-bit data rescaled to [0, 1] with uniform dequantization (adds 8 bits), log(128) for data in [-1, 1].
    """
    check_tensor(log_p, "log_p", min_dim=0)
    if isinstance(num_dims, bool) or not isinstance(num_dims, int) or num_dims < 1:
        raise ValueError(f"num_dims: expected a positive int, got {num_dims!r}")
    if not (isinstance(dequantization_offset, (int, float)) and math.isfinite(dequantization_offset)):
        raise ValueError(f"dequantization_offset: expected a finite number, got {dequantization_offset!r}")
    return (-log_p / num_dims + dequantization_offset) / math.log(2)
