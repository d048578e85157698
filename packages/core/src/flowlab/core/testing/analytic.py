"""Closed-form problems with exact velocities, scores, flow maps and densities, to test solvers and losses.

Both problems use the affine path x_t = alpha_t x_1 + sigma_t x_0 of a `Schedule` (t=0 source, t=1 data) over
vectors `x: (B, D)` with one time per sample `t: (B,)`.

- `GaussianToGaussian`: x_0 ~ N(mu_0, cov_0) and x_1 ~ N(mu_1, cov_1), independent. The marginal p_t is
  Gaussian, the marginal velocity is affine in x and, when cov_0 and cov_1 commute, so is the flow map.
- `GaussianMixture`: x_0 ~ N(0, I) and x_1 ~ sum_k w_k N(mu_k, Sigma_k); p_t = sum_k w_k N(alpha mu_k,
  alpha^2 Sigma_k + sigma^2 I) with exact score, posterior mean E[x_1 | x_t] and marginal velocity.

The methods are written to be passed straight to the solvers: `problem.velocity` is a `VectorField`
(`problem.velocity(x=x, t=t)`), `GaussianToGaussian.flow_map` is a `FlowMap` (`flow_map(x=x, s=s, t=t)`), and
`GaussianMixture.posterior_mean` is a data-prediction model. Every method is differentiable in x and in t
(forward and reverse mode) and follows the dtype and device of `x`; the parameters are cast to them on the fly
(call `.to(device, dtype)` once to avoid the cast).
"""

from __future__ import annotations

import math

import torch

from flowlab.core.distributions import multinomial, randn
from flowlab.core.paths.affine import AffinePath
from flowlab.core.paths.base import PathSample
from flowlab.core.schedules import CondOT, Schedule

__all__ = ["GaussianMixture", "GaussianToGaussian"]

_LOG_2PI = math.log(2 * math.pi)


def _as_float(value, name: str) -> torch.Tensor:
    t = torch.as_tensor(value)
    if not t.is_floating_point():
        t = t.to(torch.get_default_dtype())
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name}: contains NaN or inf values")
    return t


def _full_cov(cov: torch.Tensor, shape: tuple[int, ...], name: str) -> torch.Tensor:
    """(..., D) diagonal variances or (..., D, D) matrices -> symmetric PSD (..., D, D) in float64."""
    cov = cov.to(torch.float64)
    if tuple(cov.shape) == shape[:-1]:
        cov = torch.diag_embed(cov)
    if tuple(cov.shape) != shape:
        got = tuple(cov.shape)
        raise ValueError(f"{name}: expected shape {shape[:-1]} (diagonal variances) or {shape}, got {got}")
    scale = float(cov.abs().amax()) + 1e-300
    if float((cov - cov.transpose(-1, -2)).abs().amax()) > 1e-8 * scale:
        raise ValueError(f"{name}: covariance matrices must be symmetric")
    if float(torch.linalg.eigvalsh(cov).amin()) < -1e-10 * scale:
        raise ValueError(f"{name}: covariance matrices must be positive semi-definite")
    return 0.5 * (cov + cov.transpose(-1, -2))


def _is_diagonal(cov: torch.Tensor) -> bool:
    return bool((cov - torch.diag_embed(torch.diagonal(cov, dim1=-2, dim2=-1)) == 0).all())


def _common_eigenbasis(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor | None:
    """An orthogonal U diagonalising both symmetric (D, D) matrices, or None when they do not commute."""
    scale = float(a.abs().amax() * b.abs().amax()) + 1e-300
    if float((a @ b - b @ a).abs().amax()) > 1e-9 * scale:
        return None
    if _is_diagonal(a) and _is_diagonal(b):
        return torch.eye(a.shape[0], dtype=a.dtype)
    lam, u = torch.linalg.eigh(a)
    tol = 1e-9 * (float(lam.abs().amax()) + 1e-300)
    # Within each eigenspace of `a` (a cluster of equal eigenvalues) rotate to diagonalise `b`.
    start = 0
    for i in range(1, lam.numel() + 1):
        if i == lam.numel() or float(lam[i] - lam[start]) > tol:
            block = u[:, start:i]
            _, v = torch.linalg.eigh(block.T @ b @ block)
            u[:, start:i] = block @ v
            start = i
    return u


def _check_points(x: torch.Tensor, t: torch.Tensor, dim: int, *, t_name: str = "t") -> None:
    """Shape-only checks (no host synchronisation, so the methods can run inside sampling loops)."""
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.shape[1] != dim:
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"x: expected shape (B, {dim}), got {shape}")
    if not isinstance(t, torch.Tensor) or t.dim() != 1 or t.shape[0] != x.shape[0]:
        shape = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
        raise ValueError(f"{t_name}: expected shape ({x.shape[0]},) (one time per sample), got {shape}")


def _cast_params(params: dict, cache: dict, like: torch.Tensor) -> dict[str, torch.Tensor]:
    """The parameters on `like`'s device and dtype, cached per (device, dtype, inference mode): a copy made
    under `torch.inference_mode()` cannot be reused where autograd records."""
    key = (like.device, like.dtype, torch.is_inference_mode_enabled())
    if key not in cache:
        cache[key] = {k: v.to(device=like.device, dtype=like.dtype) for k, v in params.items()}
    return cache[key]


class GaussianToGaussian:
    """Independent x_0 ~ N(mu_0, cov_0) and x_1 ~ N(mu_1, cov_1) joined by x_t = alpha_t x_1 + sigma_t x_0.

    mu_0, mu_1: (D,); cov_0, cov_1: (D, D) or (D,) diagonal variances; `schedule` defaults to `CondOT()`.

    - marginal: m_t = alpha mu_1 + sigma mu_0, C_t = alpha^2 cov_1 + sigma^2 cov_0;
    - velocity: u_t(x) = E[alpha' x_1 + sigma' x_0 | x_t = x] = m'_t + K_t C_t^{-1} (x - m_t), K_t = C'_t / 2;
    - flow map (cov_0 and cov_1 commuting, e.g. diagonal): X_{s,t}(x) = m_t + C_t^{1/2} C_s^{-1/2} (x - m_s).
    """

    def __init__(self, mu_0, cov_0, mu_1, cov_1, schedule: Schedule | None = None) -> None:
        mu_0, mu_1 = _as_float(mu_0, "mu_0"), _as_float(mu_1, "mu_1")
        if mu_0.dim() != 1 or mu_0.shape != mu_1.shape:
            shapes = f"{tuple(mu_0.shape)} and {tuple(mu_1.shape)}"
            raise ValueError(f"mu_0, mu_1: expected two (D,) vectors, got {shapes}")
        d = mu_0.shape[0]
        c0 = _full_cov(_as_float(cov_0, "cov_0"), (d, d), "cov_0")
        c1 = _full_cov(_as_float(cov_1, "cov_1"), (d, d), "cov_1")
        if schedule is not None and not isinstance(schedule, Schedule):
            raise ValueError(f"schedule: expected a Schedule, got {type(schedule).__name__}")
        self.schedule = schedule if schedule is not None else CondOT()
        self.path = AffinePath(self.schedule, gaussian_source=False)
        self.dim = d
        dtype = torch.promote_types(mu_0.dtype, mu_1.dtype)
        basis = _common_eigenbasis(c0, c1)
        self.commuting = basis is not None
        self._params = {"mu_0": mu_0.to(dtype), "mu_1": mu_1.to(dtype), "cov_0": c0, "cov_1": c1}
        if basis is not None:
            self._params |= {
                "basis": basis,
                "lam_0": torch.einsum("ji,jk,ki->i", basis, c0, basis).clamp_min(0),
                "lam_1": torch.einsum("ji,jk,ki->i", basis, c1, basis).clamp_min(0),
            }
        self._params["sqrt_0"], self._params["sqrt_1"] = self._factor(c0), self._factor(c1)
        self._params = {k: v.to(dtype=dtype, device=mu_0.device) for k, v in self._params.items()}
        self._cache: dict = {}

    @staticmethod
    def _factor(cov: torch.Tensor) -> torch.Tensor:
        lam, u = torch.linalg.eigh(cov)
        return u * lam.clamp_min(0).sqrt()

    def __repr__(self) -> str:
        return f"GaussianToGaussian(dim={self.dim}, commuting={self.commuting}, schedule={self.schedule!r})"

    def to(self, device=None, dtype=None) -> GaussianToGaussian:
        """Move the parameters once (the methods otherwise cast them to each input's device and dtype)."""
        for k, v in self._params.items():
            self._params[k] = v.to(device=device, dtype=dtype)
        self._cache.clear()
        return self

    def _p(self, like: torch.Tensor) -> dict[str, torch.Tensor]:
        return _cast_params(self._params, self._cache, like)

    @property
    def mu_0(self) -> torch.Tensor:
        """Source mean mu_0: (D,)."""
        return self._params["mu_0"]

    @property
    def mu_1(self) -> torch.Tensor:
        """Data mean mu_1: (D,)."""
        return self._params["mu_1"]

    @property
    def cov_0(self) -> torch.Tensor:
        """Source covariance (diagonal variances expanded to a matrix): (D, D)."""
        return self._params["cov_0"]

    @property
    def cov_1(self) -> torch.Tensor:
        """Data covariance (diagonal variances expanded to a matrix): (D, D)."""
        return self._params["cov_1"]

    def _sched(self, t: torch.Tensor):
        return self.schedule(t[:, None])

    def mean(self, t: torch.Tensor) -> torch.Tensor:
        """t: (B,) -> m_t: (B, D)"""
        p, s = self._p(t), self._sched(t)
        return s.alpha * p["mu_1"] + s.sigma * p["mu_0"]

    def cov(self, t: torch.Tensor) -> torch.Tensor:
        """t: (B,) -> C_t: (B, D, D)"""
        p, s = self._p(t), self._sched(t)
        return s.alpha[..., None] ** 2 * p["cov_1"] + s.sigma[..., None] ** 2 * p["cov_0"]

    def velocity(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """The exact marginal velocity. x: (B, D), t: (B,) -> (B, D)"""
        _check_points(x, t, self.dim)
        p, s = self._p(x), self._sched(t)
        m = s.alpha * p["mu_1"] + s.sigma * p["mu_0"]
        dm = s.d_alpha * p["mu_1"] + s.d_sigma * p["mu_0"]
        if self.commuting:
            u = p["basis"]
            c = s.alpha**2 * p["lam_1"] + s.sigma**2 * p["lam_0"]
            k = s.alpha * s.d_alpha * p["lam_1"] + s.sigma * s.d_sigma * p["lam_0"]
            return dm + ((x - m) @ u * (k / c)) @ u.T
        a, sg, da, dsg = (v[..., None] for v in (s.alpha, s.sigma, s.d_alpha, s.d_sigma))
        c = a**2 * p["cov_1"] + sg**2 * p["cov_0"]
        k = a * da * p["cov_1"] + sg * dsg * p["cov_0"]
        sol = torch.cholesky_solve((x - m)[..., None], torch.linalg.cholesky(c))
        return dm + (k @ sol)[..., 0]

    def flow_map(self, x: torch.Tensor, s: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """The exact two-time map X_{s,t}(x) = m_t + C_t^{1/2} C_s^{-1/2} (x - m_s) (commuting covariances).

        x: (B, D), s, t: (B,) -> (B, D)
        """
        if not self.commuting:
            raise ValueError("cov_0, cov_1: the exact flow map needs commuting covariances (e.g. diagonal)")
        _check_points(x, s, self.dim, t_name="s")
        _check_points(x, t, self.dim)
        p, ss, st = self._p(x), self._sched(s), self._sched(t)
        m_s = ss.alpha * p["mu_1"] + ss.sigma * p["mu_0"]
        m_t = st.alpha * p["mu_1"] + st.sigma * p["mu_0"]
        c_s = ss.alpha**2 * p["lam_1"] + ss.sigma**2 * p["lam_0"]
        c_t = st.alpha**2 * p["lam_1"] + st.sigma**2 * p["lam_0"]
        u = p["basis"]
        return m_t + ((x - m_s) @ u * torch.sqrt(c_t / c_s)) @ u.T

    def log_prob(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """log p_t(x) of the Gaussian marginal. x: (B, D), t: (B,) -> (B,)"""
        _check_points(x, t, self.dim)
        p, s = self._p(x), self._sched(t)
        r = x - (s.alpha * p["mu_1"] + s.sigma * p["mu_0"])
        if self.commuting:
            c = s.alpha**2 * p["lam_1"] + s.sigma**2 * p["lam_0"]
            y = r @ p["basis"]
            return -0.5 * ((y**2 / c).sum(-1) + torch.log(c).sum(-1) + self.dim * _LOG_2PI)
        chol = torch.linalg.cholesky(self.cov(t.to(x.dtype)))
        y = torch.linalg.solve_triangular(chol, r[..., None], upper=False)[..., 0]
        logdet = 2 * torch.log(torch.diagonal(chol, dim1=-2, dim2=-1)).sum(-1)
        return -0.5 * ((y**2).sum(-1) + logdet + self.dim * _LOG_2PI)

    def sample_source(self, n: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """n draws of x_0 ~ N(mu_0, cov_0): (n, D) on the parameters' device and dtype."""
        z = randn((n, self.dim), generator=generator, device=self.mu_0.device, dtype=self.mu_0.dtype)
        return self.mu_0 + z @ self._params["sqrt_0"].T

    def sample_data(self, n: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """n draws of x_1 ~ N(mu_1, cov_1): (n, D)."""
        z = randn((n, self.dim), generator=generator, device=self.mu_1.device, dtype=self.mu_1.dtype)
        return self.mu_1 + z @ self._params["sqrt_1"].T

    def sample(self, t: torch.Tensor, *, generator: torch.Generator | None = None) -> PathSample:
        """Independent (x_0, x_1) pairs and their point x_t on the path at times t: (B,)."""
        x_0 = self.sample_source(t.shape[0], generator=generator)
        x_1 = self.sample_data(t.shape[0], generator=generator)
        return self.path.sample(x_0, x_1, t.to(x_0))


class GaussianMixture:
    """Data x_1 ~ sum_k w_k N(mu_k, Sigma_k), source x_0 ~ N(0, I), path x_t = alpha_t x_1 + sigma_t x_0.

    weights: (K,) summing to 1; means: (K, D); covs: (K, D, D) or (K, D) diagonal variances; `schedule`
    defaults to `CondOT()`. The noised marginal is p_t = sum_k w_k N(alpha mu_k, alpha^2 Sigma_k + sigma^2 I).
    Each Sigma_k is diagonalised once (Sigma_k = U_k diag(lam_k) U_k^T): every method is elementwise in that
    basis. The methods are defined wherever p_t has a density: at t=0 (alpha=0) always, and at t=1 (sigma=0
    for CondOT) when every Sigma_k is positive definite.
    """

    def __init__(self, weights, means, covs, schedule: Schedule | None = None) -> None:
        weights, means = _as_float(weights, "weights"), _as_float(means, "means")
        if means.dim() != 2:
            raise ValueError(f"means: expected shape (K, D), got {tuple(means.shape)}")
        k, d = means.shape
        if tuple(weights.shape) != (k,):
            raise ValueError(f"weights: expected shape ({k},), got {tuple(weights.shape)}")
        if bool((weights <= 0).any()) or abs(float(weights.sum()) - 1) > 1e-6:
            total = float(weights.sum())
            raise ValueError(f"weights: expected positive weights summing to 1, got sum {total:.6g}")
        cov = _full_cov(_as_float(covs, "covs"), (k, d, d), "covs")
        if schedule is not None and not isinstance(schedule, Schedule):
            raise ValueError(f"schedule: expected a Schedule, got {type(schedule).__name__}")
        self.schedule = schedule if schedule is not None else CondOT()
        self.path = AffinePath(self.schedule)
        self.num_components, self.dim = k, d
        self._diagonal = _is_diagonal(cov)
        if self._diagonal:
            lam, basis = torch.diagonal(cov, dim1=-2, dim2=-1), torch.eye(d, dtype=cov.dtype).expand(k, d, d)
        else:
            lam, basis = torch.linalg.eigh(cov)
        dtype = means.dtype
        self._params = {
            "log_w": torch.log(weights.to(torch.float64)),
            "means": means,
            "covs": cov,
            "lam": lam.clamp_min(0),
            "basis": basis,
            "sqrt": basis * lam.clamp_min(0).sqrt()[:, None, :],
        }
        self._params = {k: v.to(dtype=dtype, device=means.device) for k, v in self._params.items()}
        self._cache: dict = {}

    @classmethod
    def ring(
        cls,
        k: int = 8,
        *,
        radius: float = 4.0,
        std: float = 0.5,
        schedule: Schedule | None = None,
        dtype: torch.dtype | None = None,
    ) -> GaussianMixture:
        """The 2-D benchmark mixture: k equal-weight isotropic Gaussians (std `std`) evenly spaced on a circle
        of radius `radius`."""
        if not (isinstance(k, int) and k >= 1) or not radius >= 0 or not std > 0:
            got = f"{k}, {radius}, {std}"
            raise ValueError(f"k, radius, std: expected k >= 1, radius >= 0, std > 0, got {got}")
        dtype = dtype or torch.get_default_dtype()
        angle = torch.arange(k, dtype=torch.float64) * (2 * math.pi / k)
        means = radius * torch.stack([torch.cos(angle), torch.sin(angle)], -1)
        weights = torch.full((k,), 1 / k, dtype=torch.float64)
        covs = torch.full((k, 2), std**2, dtype=torch.float64)
        return cls(weights.to(dtype), means.to(dtype), covs, schedule)

    def __repr__(self) -> str:
        return f"GaussianMixture(K={self.num_components}, dim={self.dim}, schedule={self.schedule!r})"

    def to(self, device=None, dtype=None) -> GaussianMixture:
        """Move the parameters once (the methods otherwise cast them to each input's device and dtype)."""
        for k, v in self._params.items():
            self._params[k] = v.to(device=device, dtype=dtype)
        self._cache.clear()
        return self

    def _p(self, like: torch.Tensor) -> dict[str, torch.Tensor]:
        return _cast_params(self._params, self._cache, like)

    @property
    def weights(self) -> torch.Tensor:
        """Mixture weights w_k: (K,)."""
        return self._params["log_w"].exp()

    @property
    def means(self) -> torch.Tensor:
        """Component means mu_k: (K, D)."""
        return self._params["means"]

    @property
    def covs(self) -> torch.Tensor:
        """(K, D, D)"""
        return self._params["covs"]

    def _terms(self, x: torch.Tensor, t: torch.Tensor):
        """Per-component quantities in each component's eigenbasis.

        Returns the schedule output (shaped (B, 1, 1)), log w_k N_k(x): (B, K), y = U_k^T (x - alpha mu_k) and
        c = alpha^2 lam_k + sigma^2: (B, K, D), and the parameters.
        """
        _check_points(x, t, self.dim)
        p = self._p(x)
        s = self.schedule(t[:, None, None])
        diff = x[:, None, :] - s.alpha * p["means"]
        y = diff if self._diagonal else torch.einsum("bki,kij->bkj", diff, p["basis"])
        c = s.alpha**2 * p["lam"] + s.sigma**2
        log_comp = -0.5 * ((y**2 / c).sum(-1) + torch.log(c).sum(-1) + self.dim * _LOG_2PI)
        return s, log_comp + p["log_w"], y, c, p

    def _rotate_back(self, r: torch.Tensor, v: torch.Tensor, p) -> torch.Tensor:
        """sum_k r_k U_k v_k: r (B, K), v (B, K, D) -> (B, D)"""
        if self._diagonal:
            return torch.einsum("bk,bki->bi", r, v)
        return torch.einsum("bk,kij,bkj->bi", r, p["basis"], v)

    def log_prob(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """log p_t(x). x: (B, D), t: (B,) -> (B,)"""
        _, log_joint, _, _, _ = self._terms(x, t)
        return torch.logsumexp(log_joint, -1)

    def score(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """grad_x log p_t(x) = -sum_k r_k C_k^{-1} (x - alpha mu_k). x: (B, D), t: (B,) -> (B, D)"""
        _, log_joint, y, c, p = self._terms(x, t)
        return -self._rotate_back(torch.softmax(log_joint, -1), y / c, p)

    def posterior_mean(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """E[x_1 | x_t = x] = sum_k r_k (mu_k + alpha Sigma_k C_k^{-1} (x - alpha mu_k)). -> (B, D)"""
        s, log_joint, y, c, p = self._terms(x, t)
        r = torch.softmax(log_joint, -1)
        return r @ p["means"] + self._rotate_back(r, s.alpha * p["lam"] * y / c, p)

    def velocity(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """u_t(x) = alpha' E[x_1 | x] + sigma' E[x_0 | x] with E[x_0 | x] = -sigma score: no division by alpha
        or sigma, so it is finite at t=0 and t=1. x: (B, D), t: (B,) -> (B, D)"""
        s, log_joint, y, c, p = self._terms(x, t)
        r = torch.softmax(log_joint, -1)
        gain = (s.d_alpha * s.alpha * p["lam"] + s.d_sigma * s.sigma) / c
        return s.d_alpha[:, 0] * (r @ p["means"]) + self._rotate_back(r, gain * y, p)

    def mean(self, t: torch.Tensor) -> torch.Tensor:
        """Mean of p_t: t (B,) -> (B, D)"""
        p = self._p(t)
        return self.schedule(t[:, None]).alpha * (p["log_w"].exp() @ p["means"])

    def cov(self, t: torch.Tensor) -> torch.Tensor:
        """Covariance of p_t, alpha^2 Cov[x_1] + sigma^2 I: t (B,) -> (B, D, D)"""
        p = self._p(t)
        w = p["log_w"].exp()
        m = w @ p["means"]
        centred = p["means"] - m
        data_cov = torch.einsum("k,kij->ij", w, p["covs"]) + torch.einsum("k,ki,kj->ij", w, centred, centred)
        s = self.schedule(t[:, None, None])
        return s.alpha**2 * data_cov + s.sigma**2 * torch.eye(self.dim, dtype=t.dtype, device=t.device)

    def sample_data(self, n: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """n draws of x_1 from the mixture: (n, D) on the parameters' device and dtype."""
        p = self._params
        comp = multinomial(p["log_w"].exp().float(), n, replacement=True, generator=generator)
        z = randn((n, self.dim), generator=generator, device=p["means"].device, dtype=p["means"].dtype)
        return p["means"][comp] + torch.einsum("nij,nj->ni", p["sqrt"][comp], z)

    def sample_source(self, n: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """n draws of x_0 ~ N(0, I): (n, D)."""
        means = self._params["means"]
        return randn((n, self.dim), generator=generator, device=means.device, dtype=means.dtype)

    def sample(self, t: torch.Tensor, *, generator: torch.Generator | None = None) -> PathSample:
        """Independent (x_0, x_1) pairs and their point x_t on the path at times t: (B,)."""
        x_0 = self.sample_source(t.shape[0], generator=generator)
        x_1 = self.sample_data(t.shape[0], generator=generator)
        return self.path.sample(x_0, x_1, t.to(x_0))
