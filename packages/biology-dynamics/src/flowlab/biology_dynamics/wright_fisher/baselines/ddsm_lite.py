"""DDSM-lite: a pared-down Dirichlet diffusion score model (Avdeyev et al. 2023) on the Wright-Fisher (multivariate
Jacobi) diffusion, the baseline that shows the small-time instability the Wright-Fisher paper removes.

What DDSM does, and what is kept here:

- The forward process is the Jacobi diffusion dx = (psi / 2)(pi - x) dtau + G(x) dW, G G^T = diag(x) - x x^T, with
  psi = K and uniform pi, so the stationary law Dirichlet(psi pi) = Dirichlet(1) is flat. DDSM does not sample it
  exactly: it runs Euler-Maruyama from the vertex once, stores the states (its "noise factory") with the score of
  the transition density at each, and at training time looks states up instead of drawing them. Kept: `bank`
  paths from e_0 simulated with `sim_steps` small Euler-Maruyama steps (`core.solvers.solve_sde`, projected onto
  the simplex after every step), stored at `times` times geometric in tau from `tau_min` to the path's tau_max,
  and reused for any letter b by swapping coordinates 0 and b (the process is exchangeable in the letters).
  Euler-Maruyama with the projection is biased near the faces (negative excursions of the small coordinates are
  clipped): with the default 1000 steps the start coordinate's mean is low by up to about 1.5% of its distance
  to the vertex (K = 4; up to 3 standard errors at 8192 paths).
- The target is the score of p(x_tau | x_0 = b), which with the flat stationary law is that of the density ratio
  G_b of the spectral (Jacobi-polynomial) series along e_b, tangent-projected: s_b(x) e_b - s_b(x) / K. It is
  summed as a truncated alternating series (`series.py`, `k_max` terms, float64) everywhere, with no small-time
  branch. That is the point of the baseline: at small tau the truncated series has not converged and its
  alternating terms cancel, so it returns sign-flipped or wildly wrong values. Where the series for G_b comes out
  <= 0 (or not finite), log G_b and therefore the target are undefined; those entries are flagged (NaN in the
  stored table) and count toward `nan_rate`. Entries that are wrong but still have G_b > 0 are not detected,
  which is DDSM's behaviour too. On exact draws (k_max = 80) the share undefined, negative or off by > 50% is
  0 at tau = 0.01 for K = 4 and 20 but 42% for K = 100; 41% for K = 20 at tau = 0.002; 20% for K = 4 at
  tau = 0.001. DDSM's own smallest time (0.01 in its speed-balanced clock, tau = 2 t / K) is tau_min = 0.02 / K.
  The Wright-Fisher method avoids all of this with the lineage (Griffiths) form of the density (`likelihood.py`).
- The loss is DDSM's heuristic score matching in the diffusion's own metric: per position
  (s_theta - s)^T Sigma(x) (s_theta - s) with Sigma = diag(x) - x x^T (DDSM: v (1 - v) (.)^2 per stick-breaking
  coordinate), at grid times drawn uniformly, divided by the constant lambda = mean over the grid times j of
  lambda_j, the bank's mean target energy s^T Sigma s at time j. DDSM draws time j with probability proportional
  to lambda_j and weights its term by 1 / lambda_j (its `time_dependent_weights`, normalised to mean 1), whose
  expectation is the same uniform-time average: lite keeps that objective (up to the constant) and drops the
  importance sampling, i.e. only its variance reduction. An all-zero network has loss 1 in expectation: the loss
  is the share of the target's Sigma-energy left unexplained, dominated, as in DDSM, by small tau
  (lambda_j ~ 2 psi / tau).
- Sampling runs the reverse SDE from Dirichlet(1) at tau_max to tau_min on a geometric tau grid, with reverse
  drift (psi / 2)(pi - x) + Sigma s_theta(x) (the same derivation and conventions as `sample.py`), and returns
  the argmax letter of the final state, as DDSM does.

What "lite" drops: DDSM's stick-breaking transform (K - 1 one-dimensional Jacobi diffusions with their own
speeds, whose flat-Dirichlet case simulates only the start letter's coordinate and redraws the others from
Dirichlet(1)); here the K-dimensional diffusion runs on the simplex itself. Its importance-sampled training times
(here uniform over the grid, see above). Its own Jacobi-polynomial transition-density code, replaced by the shared
`series.py` sums with a similar truncation (DDSM: order 100, here `k_max` = 80). Its time dilation at sampling. And
there is no likelihood (no `elbo` method): DDSM's ODE likelihood is not implemented.

Times: core time t in [0, 1] (t = 0 noise at tau_max, t = 1 clean), mapped to tau by the path's dilation
tau = -(2 / psi) log(1 - (1 - t) t_max); the network sees x_t and core t.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from flowlab.biology_dynamics.wright_fisher.objective import metric_norm
from flowlab.biology_dynamics.wright_fisher.process import WrightFisherPath
from flowlab.biology_dynamics.wright_fisher.sample import simplex_noise
from flowlab.biology_dynamics.wright_fisher.series import f_series, g_series
from flowlab.core.solvers import solve_sde

__all__ = ["DDSMBatch", "DDSMLite"]

#: the Euler-Maruyama run starts its geometric steps at tau_min / _START_SPAN (after one drift step from the vertex)
_START_SPAN = 100.0


def _positive_int(value: object, name: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name}: expected an int >= {minimum}, got {value!r}")
    return value


@dataclass(frozen=True)
class DDSMBatch:
    """One training draw from the bank: x_t (B, L, K) float64 states, t (B,) core times and tau (B,) their
    dilated times (one grid time per sequence), score (B, L, K) float64 the tangent targets (0 where invalid),
    valid (B, L) bool where the series target is defined."""

    x_t: torch.Tensor
    t: torch.Tensor
    tau: torch.Tensor
    score: torch.Tensor
    valid: torch.Tensor


class DDSMLite:
    """DDSM-lite over `letters` letters (psi = letters, uniform pi): a bank of `bank` Euler-Maruyama paths of about
    `sim_steps` geometric steps from tau_min / 100 to tau_max, stored at `times` geometric grid times from tau_min
    to tau_max; targets from the spectral series truncated at `k_max`. The bank is simulated on the first
    `loss_fn` call (or `build`) on the CPU from `seed`, never from the training generator: it depends on the
    settings alone, so it is the same on every device and in a resumed run."""

    def __init__(
        self,
        letters: int,
        *,
        tau_min: float = 0.01,
        times: int = 64,
        sim_steps: int = 1000,
        bank: int = 1024,
        k_max: int = 80,
        seed: int = 0,
    ) -> None:
        _positive_int(letters, "letters", 2)
        self.path = WrightFisherPath(letters)
        self.letters, self.psi = letters, self.path.psi
        self.tau_max = float(self.path.tau(torch.zeros(1, dtype=torch.float64))[0])
        if isinstance(tau_min, bool) or not isinstance(tau_min, int | float) or not math.isfinite(tau_min):
            raise ValueError(f"tau_min: expected a finite time > 0, got {tau_min!r}")
        if not 0 < tau_min < self.tau_max:
            raise ValueError(f"tau_min: expected a time in (0, tau_max = {self.tau_max:.4g}), got {tau_min!r}")
        self.tau_min = float(tau_min)
        self.times = _positive_int(times, "times", 2)
        self.sim_steps = _positive_int(sim_steps, "sim_steps")
        self.bank_size = _positive_int(bank, "bank")
        self.k_max = _positive_int(k_max, "k_max")
        if isinstance(seed, bool) or not isinstance(seed, int) or not -(2**63) <= seed < 2**64:
            raise ValueError(f"seed: expected an int in [-2^63, 2^64) (a torch seed), got {seed!r}")
        self.seed = seed
        self.t_hi = self.core_time(torch.tensor([self.tau_min], dtype=torch.float64)).item()
        self._fine, self._stored = self._em_grid()
        self.taus = self._fine[self._stored]  # (times,) float64, tau_min .. tau_max
        self._states: torch.Tensor | None = None  # (times, bank, K) float64, coordinate 0 the start letter
        self._scores: torch.Tensor | None = None  # (times, bank) float64, NaN where undefined
        self.energy: float | None = None  # lambda: the mean target energy s^T Sigma s over grid times and bank

    def __repr__(self) -> str:
        return (
            f"DDSMLite(letters={self.letters}, tau_min={self.tau_min:g}, times={self.times}, "
            f"sim_steps={self.sim_steps}, bank={self.bank_size}, k_max={self.k_max}, seed={self.seed})"
        )

    # -- times -------------------------------------------------------------------------------------------------

    def core_time(self, tau: torch.Tensor) -> torch.Tensor:
        """Core time of dilated time tau: t = 1 - (1 - e^(-psi tau / 2)) / t_max, (...,) float64 in [0, 1]."""
        t = 1 - (-torch.expm1(-self.psi * tau.to(torch.float64) / 2)) / self.path.t_max
        return t.clamp(0, 1)

    def _speed(self, t: torch.Tensor) -> torch.Tensor:
        """|d tau / dt| = t_max (2 / psi) / (1 - s), s = (1 - t) t_max: (B,)."""
        return self.path.t_max * (2 / self.psi) / (1 - (1 - t) * self.path.t_max)

    def _em_grid(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The Euler-Maruyama run's taus (N + 1,) float64, and the indices (times,) of the stored ones: one drift step
        from 0 to about tau_min / 100, then about `sim_steps` steps of one constant ratio up to tau_max, chosen so
        that the stored grid (geometric from tau_min to tau_max) is part of the run."""
        lo, hi = math.log(self.tau_min), math.log(self.tau_max)
        h = (hi - lo + math.log(_START_SPAN)) / self.sim_steps  # the log-step sim_steps steps would take
        sub = math.ceil((hi - lo) / ((self.times - 1) * h))  # steps per stored interval
        h = (hi - lo) / ((self.times - 1) * sub)
        start = math.ceil(math.log(_START_SPAN) / h)
        logs = lo + h * torch.arange(-start, (self.times - 1) * sub + 1, dtype=torch.float64)
        fine = torch.cat([torch.zeros(1, dtype=torch.float64), logs.exp()])
        stored = 1 + start + sub * torch.arange(self.times)
        fine[stored[0]], fine[-1] = self.tau_min, self.tau_max
        return fine, stored

    # -- the bank ----------------------------------------------------------------------------------------------

    def simulate(self, *, generator: torch.Generator) -> torch.Tensor:
        """Euler-Maruyama paths of the forward diffusion from the vertex e_0, on the generator's device: the states
        at the grid times `taus`, (times, bank, K) float64 on the simplex (projected after every step)."""
        if not isinstance(generator, torch.Generator):
            raise ValueError(f"generator: expected a torch.Generator, got {type(generator).__name__}")
        device = generator.device
        pi = 1 / self.letters
        x = torch.zeros(self.bank_size, self.letters, dtype=torch.float64, device=device)
        x[:, 0] = 1.0
        grid = (self._fine / self.tau_max).to(device)  # u = tau / tau_max in [0, 1]
        grid[-1] = 1.0
        out = torch.empty(self.times, *x.shape, dtype=torch.float64, device=device)
        slot = {int(i) - 1: j for j, i in enumerate(self._stored)}  # state after step i sits at fine[i + 1]

        def keep(info) -> None:
            j = slot.get(info.step)
            if j is not None:
                out[j] = info.x

        solve_sde(
            lambda x, t: self.tau_max * self.psi / 2 * (pi - x),
            math.sqrt(self.tau_max),
            x,
            grid,
            generator=generator,
            noise_map=simplex_noise,
            projection=self.path.simplex.projx,
            callback=keep,
        )
        return out

    def target(self, x_b: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
        """The naive series score d log G_b / dx_b = e^(-psi tau / 2) (psi + 1) psi / a F_b / G_b (a = psi pi_b = 1),
        summed to `k_max` terms with no small-time branch: x_b (...,) the start letter's coordinate, tau (...,) ->
        (...,) float64 on x_b's device (summed on the CPU, where `series.py` works), NaN where the series G_b is
        <= 0 or either series is not finite (log G_b undefined)."""
        device = x_b.device
        tau = tau.to(device="cpu", dtype=torch.float64)
        x_b = x_b.to(device="cpu", dtype=torch.float64)
        a = self.psi / self.letters
        g = g_series(x_b, tau, self.psi, a, k_max=self.k_max)
        f = f_series(x_b, tau, self.psi, a, k_max=self.k_max)
        score = torch.exp(-self.psi * tau / 2) * (self.psi + 1) * self.psi / a * f / g
        ok = (g > 0) & torch.isfinite(g) & torch.isfinite(f) & torch.isfinite(score)
        return torch.where(ok, score, torch.full_like(score, math.nan)).to(device)

    def build(self) -> None:
        """Simulate the bank from `seed` on the CPU, its targets and their mean energy lambda, once (later calls do
        nothing)."""
        if self._states is not None:
            return
        states = self.simulate(generator=torch.Generator().manual_seed(self.seed))
        taus = self.taus.to(states.device)[:, None].expand(states.shape[:2])
        scores = self.target(states[..., 0], taus)  # (times, bank)
        each = scores**2 * states[..., 0] * (1 - states[..., 0])  # s^T Sigma s of s e_0, (times, bank)
        valid = torch.isfinite(each)
        per_time = torch.where(valid, each, 0.0).sum(-1) / valid.sum(-1).clamp_min(1)  # lambda_j
        kept = valid.any(-1)
        energy = float(per_time[kept].mean()) if bool(kept.any()) else 1.0
        self._states, self._scores, self.energy = states, scores, energy if energy > 0 else 1.0

    @property
    def bank(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """(states (times, bank, K), scores (times, bank)) once built, else None; coordinate 0 is the start
        letter's, and scores are the series target along e_0 (NaN where undefined)."""
        return None if self._states is None else (self._states, self._scores)

    def _on(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        if self._states.device != device:
            self._states, self._scores = self._states.to(device), self._scores.to(device)
        return self._states, self._scores

    # -- training ----------------------------------------------------------------------------------------------

    def noisy(self, x_0: torch.Tensor, *, generator: torch.Generator) -> DDSMBatch:
        """x_0 (B, L) int64 -> a `DDSMBatch`: one grid time per sequence and one bank path per position (both
        uniform, drawn with `generator`), the path's coordinates 0 and x_0 swapped. Builds the bank on first use."""
        if not isinstance(x_0, torch.Tensor) or x_0.dtype != torch.long or x_0.dim() != 2:
            raise ValueError("x_0: expected (B, L) int64 letters")
        if bool(((x_0 < 0) | (x_0 >= self.letters)).any()):
            raise ValueError(f"x_0: expected letters in [0, {self.letters})")
        self.build()
        device = x_0.device
        states, scores = self._on(device)
        b, length = x_0.shape
        j = torch.randint(self.times, (b,), generator=generator, device=generator.device).to(device)
        r = torch.randint(self.bank_size, (b, length), generator=generator, device=generator.device).to(device)
        x = states[j[:, None], r]  # (B, L, K)
        c = torch.arange(self.letters, device=device)
        own = x_0[..., None]
        x = x.gather(-1, torch.where(c == own, 0, torch.where(c == 0, own, c)))
        s = scores[j[:, None], r]  # (B, L)
        valid = torch.isfinite(s)
        s = torch.where(valid, s, torch.zeros_like(s))
        onehot = torch.nn.functional.one_hot(x_0, self.letters).to(torch.float64)
        tau = self.taus.to(device)[j]
        return DDSMBatch(
            x_t=x,
            t=self.core_time(tau),
            tau=tau,
            score=s[..., None] * (onehot - 1 / self.letters),
            valid=valid,
        )

    def score(self, model: Any, x: torch.Tensor, t: torch.Tensor, cond: dict[str, Any] | None = None) -> torch.Tensor:
        """The network's score, tangent-projected (mean over letters removed): x (B, L, K), t (B,) core times ->
        (B, L, K) float64."""
        out = model(x=x.float(), t=t.float(), **(cond or {}))
        if not isinstance(out, torch.Tensor) or out.shape != x.shape:
            got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            raise ValueError(f"model: expected a score of shape {tuple(x.shape)}, got {got}")
        out = out.to(torch.float64)
        return out - out.mean(-1, keepdim=True)

    def loss_fn(self, model: Any, batch: Any, generator: torch.Generator) -> tuple[torch.Tensor, dict]:
        """For `core.train.fit`: batch x_0 (B, L) int64 or (x_0, cond dict) -> the Sigma-metric score error
        (s_theta - s)^T Sigma (s_theta - s) / lambda, mean over positions and then over the sequences
        whose every target is defined; logs `nan_rate`, the share of sequences left out (an undefined series
        target, or a non-finite term). Undefined targets are replaced by 0 before the loss, so no NaN reaches
        the gradient."""
        x_0, cond = batch if isinstance(batch, tuple) else (batch, None)
        draw = self.noisy(x_0, generator=generator)
        d = self.score(model, draw.x_t, draw.t, cond) - draw.score
        term = metric_norm(draw.x_t * d, draw.x_t).mean(-1) / self.energy  # (B,)
        ok = draw.valid.all(-1) & torch.isfinite(term)
        loss = torch.where(ok, term, torch.zeros_like(term)).sum() / ok.sum().clamp_min(1)
        return loss.float(), {"nan_rate": (~ok).float().mean()}

    # -- sampling ----------------------------------------------------------------------------------------------

    @torch.no_grad()
    def sample(
        self,
        model: Any,
        n: int,
        length: int,
        *,
        steps: int,
        generator: torch.Generator,
        device: torch.device | str = "cpu",
        cond: dict[str, Any] | None = None,
        return_simplex: bool = False,
    ) -> torch.Tensor:
        """(n, length) int64 letters, the argmax of the reverse SDE's final state (or, with `return_simplex`, that
        state, (n, length, K) float64): Euler-Maruyama on `steps` geometric steps in tau from Dirichlet(1) at
        tau_max to tau_min, drift (psi / 2)(pi - x) + Sigma s_theta(x) and noise G(x), projected on the simplex."""
        _positive_int(n, "n")
        _positive_int(length, "length")
        _positive_int(steps, "steps")
        device = torch.device(device)
        taus = torch.logspace(math.log10(self.tau_max), math.log10(self.tau_min), steps + 1, dtype=torch.float64)
        grid = self.core_time(taus).clamp(0, self.t_hi).to(device)
        grid[0], grid[-1] = 0.0, self.t_hi
        pi = 1 / self.letters

        def drift(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
            s = self.score(model, x, t, cond)
            pull = x * s - x * (x * s).sum(-1, keepdim=True)  # Sigma s
            return self._speed(t)[:, None, None] * (self.psi / 2 * (pi - x) + pull)

        ones = torch.ones(n, length, self.letters, dtype=torch.float64, device=device)
        x = self.path.simplex.random_dirichlet(n, ones, generator=generator)
        x = solve_sde(
            drift,
            lambda t: self._speed(t).sqrt(),
            x,
            grid,
            generator=generator,
            noise_map=simplex_noise,
            projection=self.path.simplex.projx,
        )
        return x if return_simplex else x.argmax(-1)
