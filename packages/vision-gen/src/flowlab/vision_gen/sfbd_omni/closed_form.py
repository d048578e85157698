"""SFBD-OMNI's alternating minimisation where it has a closed form: Gaussian models under a linear-Gaussian corruption,
and finite state spaces. They are the exact references the learned loop is tested against.

One round (clean weight w = lambda / (1 + lambda), online refresh share gamma):
  u_y(x) = p(x) r(y | x) / (T_r p)(y);   p~' = gamma int q(y) u_y dy + (1 - gamma) p~;   p' = (1 - w) p~' + w h.
"""

from __future__ import annotations

import math

import torch

from flowlab.core.validation import check_tensor

__all__ = [
    "discrete_iteration",
    "discrete_posterior",
    "gaussian_closed_form_iteration",
    "kl_divergence",
    "mixture_moments",
]


def _square(x: object, name: str, d: int) -> torch.Tensor:
    check_tensor(x, name, min_dim=2)
    if tuple(x.shape) != (d, d):
        raise ValueError(f"{name}: expected shape ({d}, {d}), got {tuple(x.shape)}")
    return x


def mixture_moments(
    m_a: torch.Tensor, S_a: torch.Tensor, m_b: torch.Tensor, S_b: torch.Tensor, w: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean (D,) and covariance (D, D) of the mixture (1 - w) N(m_a, S_a) + w N(m_b, S_b)."""
    m = (1 - w) * m_a + w * m_b
    second = (1 - w) * (S_a + torch.outer(m_a, m_a)) + w * (S_b + torch.outer(m_b, m_b))
    return m, second - torch.outer(m, m)


def gaussian_closed_form_iteration(
    m: torch.Tensor,
    S: torch.Tensor,
    A: torch.Tensor,
    Gamma: torch.Tensor,
    m_q: torch.Tensor,
    S_q: torch.Tensor,
    *,
    steps: int,
    clean_weight: float = 0.0,
    clean_moments: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """`steps` rounds from the model N(m, S) (D,), (D, D) for y = A x + e, A: (M, D), e ~ N(0, Gamma (M, M)), data
    moments (m_q (M,), S_q (M, M)). Posterior gain K = S A^T (A S A^T + Gamma)^-1; the reconstructions' law has
    mean m + K (m_q - A m) and covariance K S_q K^T + (I - K A) S; with clean_weight w > 0 it is mixed with the clean
    set's moments (`clean_moments`) and matched by a Gaussian. Returns the final (m, S)."""
    d = m.shape[0]
    check_tensor(m, "m")
    _square(S, "S", d)
    check_tensor(A, "A", min_dim=2)
    if A.dim() != 2 or A.shape[1] != d:
        raise ValueError(f"A: expected shape (M, {d}), got {tuple(A.shape)}")
    k = A.shape[0]
    _square(Gamma, "Gamma", k)
    _square(S_q, "S_q", k)
    if not (isinstance(steps, int) and steps >= 0):
        raise ValueError(f"steps: expected a non-negative int, got {steps!r}")
    if not 0 <= clean_weight < 1:
        raise ValueError(f"clean_weight: expected a weight in [0, 1), got {clean_weight!r}")
    if clean_weight > 0 and clean_moments is None:
        raise ValueError("clean_moments: required (mean, covariance of the clean set) when clean_weight > 0")
    eye = torch.eye(d, dtype=S.dtype, device=S.device)
    for _ in range(steps):
        K = torch.linalg.solve(A @ S @ A.T + Gamma, A @ S).T
        m = m + K @ (m_q - A @ m)
        S = K @ S_q @ K.T + (eye - K @ A) @ S
        if clean_weight > 0:
            m, S = mixture_moments(m, S, *clean_moments, clean_weight)
        S = (S + S.T) / 2
    return m, S


def _check_law(p: object, name: str) -> torch.Tensor:
    check_tensor(p, name)
    if p.dim() != 1 or bool((p < 0).any()) or abs(float(p.sum()) - 1) > 1e-8:
        raise ValueError(f"{name}: expected a probability vector (S,) of non-negative entries summing to 1")
    return p


def _check_channel(r: object, states: int) -> torch.Tensor:
    check_tensor(r, "r", min_dim=2)
    if r.dim() != 2 or r.shape[1] != states or bool((r < 0).any()):
        raise ValueError(f"r: expected a non-negative transition matrix (Y, {states}) with r[y, x] = r(y | x)")
    if not torch.allclose(r.sum(0), torch.ones((), dtype=r.dtype), atol=1e-8):
        raise ValueError("r: every column r(. | x) must sum to 1")
    return r


def discrete_posterior(p: torch.Tensor, r: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Bayes' rule on a finite space: u_y(x) = p(x) r(y | x) / sum_x' p(x') r(y | x').

    p: (S,) the model; r: (Y, S) with r[y, x] = r(y | x); y: (B,) observed outcomes -> (B, S)."""
    p = _check_law(p, "p")
    r = _check_channel(r, p.shape[0])
    if not isinstance(y, torch.Tensor) or y.dim() != 1 or y.dtype != torch.long:
        raise ValueError("y: expected a 1-D long tensor of outcome indices")
    if bool((y < 0).any()) or bool((y >= r.shape[0]).any()):
        raise ValueError(f"y: outcome indices must lie in [0, {r.shape[0]})")
    joint = r[y] * p
    evidence = joint.sum(-1, keepdim=True)
    if bool((evidence == 0).any()):
        raise ValueError("y: an outcome has zero probability under the model")
    return joint / evidence


def kl_divergence(a: torch.Tensor, b: torch.Tensor) -> float:
    """KL(a || b) of two probability vectors (0 log 0 = 0; inf where a > 0 = b)."""
    support = a > 0
    if bool((b[support] == 0).any()):
        return math.inf
    return float((a[support] * (a[support] / b[support]).log()).sum())


def discrete_iteration(
    p: torch.Tensor,
    r: torch.Tensor,
    q: torch.Tensor,
    *,
    steps: int,
    clean: torch.Tensor | None = None,
    clean_weight: float = 0.0,
    gamma: float = 1.0,
) -> torch.Tensor:
    """The alternating (gamma = 1) or online (gamma < 1) iteration on a finite space from the model p (S,), for the
    channel r (Y, S) and the corrupted law q (Y,), mixing `clean` (S,) with weight clean_weight. Returns the
    models p^0 .. p^steps, (steps + 1, S)."""
    p = _check_law(p, "p")
    r = _check_channel(r, p.shape[0])
    q = _check_law(q, "q")
    if q.shape[0] != r.shape[0]:
        raise ValueError(f"q: expected {r.shape[0]} outcomes like r, got {q.shape[0]}")
    if not 0 < gamma <= 1:
        raise ValueError(f"gamma: expected a refresh share in (0, 1], got {gamma!r}")
    if not 0 <= clean_weight < 1:
        raise ValueError(f"clean_weight: expected a weight in [0, 1), got {clean_weight!r}")
    if clean_weight > 0:
        if clean is None:
            raise ValueError("clean: required (the clean law h) when clean_weight > 0")
        clean = _check_law(clean, "clean")
    history, pool = [p], p
    for _ in range(steps):
        predicted = r @ p
        reconstructed = p * (r.T @ torch.where(q > 0, q / predicted, torch.zeros_like(q)))
        pool = gamma * reconstructed + (1 - gamma) * pool
        p = (1 - clean_weight) * pool + clean_weight * clean if clean_weight > 0 else pool
        history.append(p)
    return torch.stack(history)
