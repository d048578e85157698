"""Free-energy analysis: exact PMFs by quadrature, sample PMFs, reweighting, Delta F, FES RMSE, basin coverage, and
torsion-space distances (marginal KL, W2 on the torus) between weighted sample sets.

Energies in units of kT inside `pmf_quadrature` (the toys); everywhere else `kT` is passed explicitly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from flowlab.core.manifolds import FlatTorus
from flowlab.core.metrics import wasserstein

__all__ = [
    "basin_coverage",
    "delta_f_from_pmf",
    "delta_f_from_samples",
    "fes_rmse",
    "pmf_from_samples",
    "pmf_quadrature",
    "reweight",
    "torsion_marginal_kl",
    "torsion_w2",
]


def pmf_quadrature(energy, box, centers: torch.Tensor, *, n_y: int = 600) -> torch.Tensor:
    """F(s) = -ln int exp(-E(s, y)) dy (kT units) for a 2-D energy with CV = x, at centers: (M,) -> (M,), min 0.

    energy: callable (B, 2) -> (B,); box: ((x_lo, x_hi), (y_lo, y_hi)) (y range integrated by the trapezoid rule).
    """
    y = torch.linspace(*box[1], n_y, dtype=torch.float64)
    xx, yy = torch.meshgrid(centers.to(torch.float64), y, indexing="ij")
    e = energy(torch.stack([xx.flatten(), yy.flatten()], -1)).view(xx.shape)
    logz = torch.logsumexp(-e, dim=1) + torch.log(y[1] - y[0])
    f = -logz
    return f - f.min()


def reweight(bias_values: torch.Tensor, kT: float) -> torch.Tensor:
    """Normalised weights w_i ∝ exp(+V(s_i) / kT) of samples drawn from exp(-(E + V) / kT): (N,) -> (N,)."""
    logw = bias_values.to(torch.float64) / kT
    return torch.softmax(logw, dim=0)


def pmf_from_samples(
    s: torch.Tensor, edges: torch.Tensor, *, weights: torch.Tensor | None = None, pseudo: float = 0.5
) -> torch.Tensor:
    """F = -ln p (kT units) of a (weighted) 1-D histogram on `edges` (M + 1,) -> (M,), min 0.

    Empty bins get `pseudo` counts (in units of the mean sample weight) so missing regions count as high F.
    """
    s = s.to(torch.float64).flatten().contiguous()
    w = torch.ones_like(s) / len(s) if weights is None else weights.to(torch.float64) / weights.sum()
    idx = torch.bucketize(s, edges.to(torch.float64)) - 1
    keep = (idx >= 0) & (idx < len(edges) - 1)
    hist = torch.zeros(len(edges) - 1, dtype=torch.float64).index_add_(0, idx[keep], w[keep])
    hist = hist.clamp_min(pseudo / len(s))
    f = -torch.log(hist / torch.diff(edges.to(torch.float64)))
    return f - f.min()


def fes_rmse(estimate: torch.Tensor, exact: torch.Tensor, *, cutoff: float = 6.0) -> float:
    """RMSE (kT) over the populated region (exact F <= cutoff kT above its minimum), after the best constant shift."""
    mask = (exact - exact.min()) <= cutoff
    diff = (estimate - exact)[mask]
    diff = diff - diff.mean()
    return float(diff.pow(2).mean().sqrt())


def delta_f_from_pmf(f: torch.Tensor, centers: torch.Tensor, a: Sequence[float], b: Sequence[float]) -> float:
    """Delta F_AB = -ln (int_B e^-F / int_A e^-F) (kT units) for CV intervals a = (lo, hi), b = (lo, hi)."""
    in_a = (centers >= a[0]) & (centers <= a[1])
    in_b = (centers >= b[0]) & (centers <= b[1])
    return float(torch.logsumexp(-f[in_a], 0) - torch.logsumexp(-f[in_b], 0))


def delta_f_from_samples(s: torch.Tensor, a, b, *, weights: torch.Tensor | None = None, pseudo: float = 0.5) -> float:
    """Delta F_AB = -ln (sum_B w / sum_A w) (kT units); s: (N,) or (N, K) with a, b per-CV (lo, hi) boxes.

    An empty basin B gets `pseudo` samples' weight (a missed basin reads as a large, finite Delta F); an empty A
    gives NaN.
    """
    s = s.to(torch.float64)
    if s.dim() == 1:
        s, a, b = s[:, None], (a,), (b,)
    w = torch.ones(len(s), dtype=torch.float64) if weights is None else weights.to(torch.float64) * len(s)

    def mass(box) -> torch.Tensor:
        inside = torch.ones(len(s), dtype=torch.bool)
        for k, (lo, hi) in enumerate(box):
            inside &= (s[:, k] >= lo) & (s[:, k] <= hi)
        return (w * inside).sum()

    m_a, m_b = mass(a), mass(b)
    if float(m_a) == 0:
        return float("nan")  # no reference basin: undefined
    return float(torch.log(m_a) - torch.log(m_b.clamp_min(pseudo * float(w.mean()))))


def basin_coverage(x: torch.Tensor, minima, radius: float, *, min_fraction: float = 0.005) -> tuple[int, list[int]]:
    """Count basins visited: a basin is found when >= max(3, min_fraction N) samples lie within `radius` of it.

    x: (N, >=2) (the first two coordinates are compared with minima: (K, 2)). Returns (found, counts per basin).
    """
    m = torch.as_tensor(minima, dtype=torch.float64)
    d = torch.cdist(x[:, :2].to(torch.float64), m)
    nearest = d.argmin(1)
    close = d.min(1).values <= radius
    counts = [int(((nearest == k) & close).sum()) for k in range(len(m))]
    need = max(3, int(min_fraction * len(x)))
    return sum(c >= need for c in counts), counts


def _normalised(w: torch.Tensor | None, n: int) -> torch.Tensor:
    if w is None:
        return torch.full((n,), 1.0 / n, dtype=torch.float64)
    w = w.to(torch.float64)
    if w.shape != (n,) or not bool(torch.isfinite(w).all()) or bool((w < 0).any()) or not float(w.sum()) > 0:
        raise ValueError(f"weights: expected ({n},) finite non-negative values with a positive sum")
    return w / w.sum()


def torsion_marginal_kl(
    ref: torch.Tensor,
    s: torch.Tensor,
    *,
    ref_weights: torch.Tensor | None = None,
    weights: torch.Tensor | None = None,
    bins: int = 36,
    eps: float = 1e-6,
) -> torch.Tensor:
    """KL(ref || ours) of each angle's marginal histogram on `bins` bins over [-pi, pi): (K,).

    ref: (M, K), s: (N, K) angles in radians (wrapped); optional weights (M,), (N,). Every bin of both histograms
    gets `eps` before normalising, so a bin the samples miss costs a large but finite amount.
    """
    wr, ws = _normalised(ref_weights, len(ref)), _normalised(weights, len(s))

    def hist(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        u = torch.remainder(x.to(torch.float64) + math.pi, 2 * math.pi) / (2 * math.pi)
        idx = (u * bins).long().clamp(0, bins - 1)
        out = torch.full((x.shape[1], bins), eps, dtype=torch.float64)
        out.scatter_add_(1, idx.T, w.expand(x.shape[1], -1).contiguous())
        return out / out.sum(1, keepdim=True)

    p, q = hist(ref, wr), hist(s, ws)
    return (p * (p / q).log()).sum(1)


def torsion_w2(
    ref: torch.Tensor, s: torch.Tensor, *, ref_weights: torch.Tensor | None = None, weights: torch.Tensor | None = None
) -> float:
    """Exact W2 on the flat torus [-pi, pi)^K between weighted angle sets ref: (M, K) and s: (N, K) (radians);
    weights (normalised, uniform when None) are checked by the core `wasserstein` (as its a = weights, b =
    ref_weights)."""
    f64 = {"dtype": torch.float64}
    a = None if weights is None else weights.to(**f64)
    b = None if ref_weights is None else ref_weights.to(**f64)
    return float(wasserstein(s.to(**f64), ref.to(**f64), a=a, b=b, manifold=FlatTorus(ref.shape[1])))
