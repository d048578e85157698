"""Frechet distance between Gaussians fitted to two feature sets (FID-style), in float64."""

from __future__ import annotations

import torch

from flowlab.core.validation import check_tensor

__all__ = ["frechet_distance", "frechet_distance_from_moments", "metric_dtype"]


def metric_dtype(device: torch.device) -> torch.dtype:
    """float64 where the device has it (MPS does not), for metrics that need the precision."""
    return torch.float32 if device.type == "mps" else torch.float64


def _sqrt_psd(A: torch.Tensor) -> torch.Tensor:
    """Symmetric square root of a symmetric positive semi-definite matrix (eigenvalues clamped at 0)."""
    w, V = torch.linalg.eigh(A)
    return (V * w.clamp_min(0).sqrt()) @ V.T


def frechet_distance_from_moments(
    mu_a: torch.Tensor, cov_a: torch.Tensor, mu_b: torch.Tensor, cov_b: torch.Tensor
) -> torch.Tensor:
    """||mu_a - mu_b||^2 + Tr(S_a + S_b - 2 (S_a^{1/2} S_b S_a^{1/2})^{1/2}) -> 0-d tensor (float64).

    mu: (D,), cov: (D, D) symmetric PSD. The trace of the matrix square root is the sum of the square roots
    of the eigenvalues of the symmetric PSD matrix S_a^{1/2} S_b S_a^{1/2}, so no complex parts arise (unlike
    a general sqrtm of S_a S_b). This is also W_2^2 between the two Gaussians.
    """
    for name, mu in (("mu_a", mu_a), ("mu_b", mu_b)):
        check_tensor(mu, name)
        if mu.dim() != 1:
            raise ValueError(f"{name}: expected a mean vector (D,), got shape {tuple(mu.shape)}")
    d = mu_a.shape[0]
    if mu_b.shape != (d,):
        raise ValueError(f"mu_b: expected shape ({d},) like mu_a, got {tuple(mu_b.shape)}")
    for name, cov in (("cov_a", cov_a), ("cov_b", cov_b)):
        check_tensor(cov, name)
        if cov.shape != (d, d):
            raise ValueError(f"{name}: expected shape ({d}, {d}), got {tuple(cov.shape)}")
        if not torch.allclose(cov, cov.T, rtol=1e-5, atol=1e-8 * float(cov.abs().max().clamp_min(1))):
            raise ValueError(f"{name}: expected a symmetric covariance matrix")
    dtype = metric_dtype(mu_a.device)
    mu_a, mu_b, cov_a, cov_b = (v.to(dtype) for v in (mu_a, mu_b, cov_a, cov_b))
    root_a = _sqrt_psd(cov_a)
    middle = root_a @ cov_b @ root_a
    cross = torch.linalg.eigvalsh((middle + middle.T) / 2).clamp_min(0).sqrt().sum()
    return (mu_a - mu_b).square().sum() + torch.trace(cov_a) + torch.trace(cov_b) - 2 * cross


def frechet_distance(feat_a: torch.Tensor, feat_b: torch.Tensor) -> torch.Tensor:
    """Frechet distance of Gaussians fitted (mean, unbiased covariance) to feat_a: (N, D), feat_b: (M, D)."""
    for name, f in (("feat_a", feat_a), ("feat_b", feat_b)):
        check_tensor(f, name)
        if f.dim() != 2 or f.shape[0] < 2:
            raise ValueError(f"{name}: expected features (N, D) with N >= 2, got shape {tuple(f.shape)}")
    if feat_a.shape[1] != feat_b.shape[1]:
        raise ValueError(f"feat_b: expected {feat_a.shape[1]} features like feat_a, got {feat_b.shape[1]}")
    dtype = metric_dtype(feat_a.device)
    fa, fb = feat_a.to(dtype), feat_b.to(dtype)
    return frechet_distance_from_moments(
        fa.mean(0),
        torch.cov(fa.T).reshape(fa.shape[1], -1),
        fb.mean(0),
        torch.cov(fb.T).reshape(fb.shape[1], -1),
    )
