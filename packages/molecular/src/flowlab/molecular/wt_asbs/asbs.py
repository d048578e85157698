"""Adjoint Schroedinger-bridge sampler (ASBS) with an optional well-tempered CV bias (WT-ASBS).

Base process (t=0 source, t=1 sample): dX = g(t) dW with the EDM-shaped g(t) = ((1-t) s_max^(1/rho) +
t s_min^(1/rho))^rho (`EDMNoise`). Controlled SDE dX = g^2 b_theta(t, X) dt + g dW (core `solve_sde`).
Adjoint matching: b_theta(t, X_t) -> -c(X_1), c = clip(grad(E + V)(X_1) / kT) + h_phi(X_1), with X_t from the base
bridge between buffered (X_0, X_1) (core `BridgePath` with the closed-form cumulative variance).
Corrector matching: h_phi(X_1) -> (X_0 - X_1) / V_tot, the score of the base transition.
Each epoch refreshes its stage's replay buffer, then takes `steps_per_epoch` AdamW steps through the core `fit`.
Warm start (optional, before the curriculum): bridge matching of the controller on independent pairs of a source
draw and a data sample (short MD), b_theta(t, X_t) -> (X_1 - X_t) / (V_tot - S(t)), whose SDE ends on the data.
With a `WellTemperedBias`, hills are deposited at the CVs of every epoch's new samples after `skip_epochs`.
`sample_weighted` adds path-space (Girsanov) importance weights for the unbiased Boltzmann density.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import torch
from torch import nn

from flowlab.core.config import Config
from flowlab.core.geometry import mean_free
from flowlab.core.grids import uniform
from flowlab.core.nets import MLP, TimeMLP, seeded_init
from flowlab.core.solvers import Trajectory, solve_sde
from flowlab.core.train import fit
from flowlab.molecular.wt_asbs.bias import BiasConfig, WellTemperedBias
from flowlab.molecular.wt_asbs.cvs import CVSet
from flowlab.molecular.wt_asbs.potentials import Potential

__all__ = ["ASBS", "ASBSConfig", "EDMNoise", "SamplerConfig", "TrainLog", "clip_per_atom"]


class EDMNoise:
    """g(t) = ((1 - t) a + t b)^rho, a = sigma_max^(1/rho), b = sigma_min^(1/rho); S(t) = int_0^t g^2 (closed form)."""

    def __init__(self, sigma_max: float, sigma_min: float, rho: float = 3.0) -> None:
        if not (sigma_max > sigma_min > 0):
            raise ValueError(f"sigma_max, sigma_min: expected sigma_max > sigma_min > 0, got {sigma_max}, {sigma_min}")
        if not rho > 0:
            raise ValueError(f"rho: expected a positive exponent, got {rho!r}")
        self.sigma_max, self.sigma_min, self.rho = float(sigma_max), float(sigma_min), float(rho)
        self.a, self.b = sigma_max ** (1 / rho), sigma_min ** (1 / rho)
        self.total = self._antiderivative(0.0) - self._antiderivative(1.0)

    def _antiderivative(self, t):
        p = 2 * self.rho + 1
        return ((1 - t) * self.a + t * self.b) ** p / (p * (self.a - self.b))

    def g(self, t: torch.Tensor) -> torch.Tensor:
        """t: (B,) -> g(t): (B,)."""
        return ((1 - t) * self.a + t * self.b) ** self.rho

    def variance(self, t: torch.Tensor) -> torch.Tensor:
        """S(t) = int_0^t g(u)^2 du, elementwise; S(1) = `total` (V_tot)."""
        return self._antiderivative(0.0) - self._antiderivative(t)

    def remaining(self, t: torch.Tensor) -> torch.Tensor:
        """V_tot - S(t) = int_t^1 g(u)^2 du, elementwise, without the cancellation of `total - variance(t)` near
        t = 1 (where it is about sigma_min^2 (1 - t))."""
        return self._antiderivative(t) - self._antiderivative(1.0)


def clip_per_atom(grad: torch.Tensor, max_norm: float, atom_dim: int) -> torch.Tensor:
    """Scale each atom's (or each toy sample's, atom_dim = D) gradient block to norm <= max_norm: (B, D)."""
    blocks = grad.view(grad.shape[0], -1, atom_dim)
    norm = blocks.norm(dim=-1, keepdim=True)
    return (blocks * (max_norm / norm.clamp_min(max_norm))).reshape(grad.shape)


@dataclass(frozen=True)
class ASBSConfig(Config):
    """Curriculum and sizes. stages: a string of 'A' (adjoint) / 'C' (corrector) stages. stop_above_kT > 0 stops a
    diverging run: training ends once the median energy of an adjoint epoch's new samples has stayed more than
    stop_above_kT above the lowest such median of the run for `stop_patience` adjoint epochs in a row (0: never)."""

    stages: str = "ACACA"
    adjoint_epochs: int = 20
    corrector_epochs: int = 10
    steps_per_epoch: int = 50
    batch_size: int = 256
    buffer_size: int = 2048
    new_samples: int = 256
    sde_steps: int = 100
    lr: float = 1e-3
    weight_decay: float = 1e-3
    grad_clip: float = 100.0
    force_clip: float = 100.0
    skip_epochs: int = 10
    hidden: tuple[int, ...] = (64, 64, 64)
    warm_start_steps: int = 0
    warm_start_lr: float = 3e-4
    stop_above_kT: float = 0.0
    stop_patience: int = 20

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.stages or set(self.stages) - {"A", "C"}:
            raise ValueError(f"stages: expected a non-empty string of 'A'/'C', got {self.stages!r}")
        for name in (
            "adjoint_epochs",
            "corrector_epochs",
            "steps_per_epoch",
            "batch_size",
            "buffer_size",
            "new_samples",
            "sde_steps",
            "stop_patience",
        ):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"{name}: expected a positive integer, got {v!r}")
        if self.skip_epochs < 0:
            raise ValueError(f"skip_epochs: expected >= 0, got {self.skip_epochs!r}")
        if not isinstance(self.warm_start_steps, int) or self.warm_start_steps < 0:
            msg = f"expected an integer >= 0 (0: no warm start), got {self.warm_start_steps!r}"
            raise ValueError(f"warm_start_steps: {msg}")
        if not self.warm_start_lr > 0:
            raise ValueError(f"warm_start_lr: expected a positive learning rate, got {self.warm_start_lr!r}")
        if not self.stop_above_kT >= 0:
            raise ValueError(f"stop_above_kT: expected >= 0 (0: never stop early), got {self.stop_above_kT!r}")

    @property
    def epochs(self) -> int:
        """The curriculum's epochs: `adjoint_epochs` per 'A' stage plus `corrector_epochs` per 'C' stage."""
        return self.stages.count("A") * self.adjoint_epochs + self.stages.count("C") * self.corrector_epochs

    @property
    def steps(self) -> int:
        """The curriculum's AdamW steps in all: `epochs` x `steps_per_epoch`."""
        return self.epochs * self.steps_per_epoch

    def with_steps(self, steps: int) -> ASBSConfig:
        """This curriculum taking `steps` AdamW steps in all, spread evenly over its epochs; ValueError naming
        `steps` unless it is a positive multiple of `epochs` (the message suggests the nearest two)."""
        e = self.epochs
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1 or steps % e:
            low = max(steps // e, 1) * e if isinstance(steps, int) else e
            msg = f"expected a positive multiple of the curriculum's {e} epochs (e.g. {low} or {low + e})"
            raise ValueError(f"steps: {msg}, got {steps!r}")
        return replace(self, steps_per_epoch=steps // e)


@dataclass(frozen=True)
class SamplerConfig(Config):
    """One (WT-)ASBS sampler as the CLI and the benchmarks build it: the curriculum `asbs`, the EDM noise from
    `sigma_max` to `sigma_min` (rho = 3), the Gaussian source's `source_std` and, for WT-ASBS, the `bias` grid and
    hills (its range, kT and periodicity come from the system's CVs)."""

    asbs: ASBSConfig
    bias: BiasConfig
    sigma_max: float
    sigma_min: float
    source_std: float

    def noise(self) -> EDMNoise:
        """The base process's `EDMNoise(sigma_max, sigma_min, 3.0)`."""
        return EDMNoise(self.sigma_max, self.sigma_min, 3.0)


@dataclass
class TrainLog:
    """Per-epoch records: stage, loss, energy evaluations so far, bias hills so far, the bias's maximum, the median
    energy / kT of the epoch's new samples (adjoint epochs; NaN for corrector epochs); wall seconds; the epoch
    after which a diverging run was stopped (`ASBSConfig.stop_above_kT`), None when it ran its curriculum."""

    stage: list[str] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    energy_evals: list[int] = field(default_factory=list)
    hills: list[int] = field(default_factory=list)
    max_bias: list[float] = field(default_factory=list)
    median_energy_kT: list[float] = field(default_factory=list)
    seconds: float = 0.0
    stopped_epoch: int | None = None


class ASBS:
    """ASBS(potential, noise, config, ...) ; `.train()`, `.sample(n)`, `.sample_weighted(n)` (with path-space
    importance weights); WT-ASBS when `bias` and `cvs` are given.

    source_std: std of the Gaussian source around source_mean ((D,) or None for 0), one value or one per coordinate
    ((D,), e.g. wide along a CV's own coordinate and narrow elsewhere); atom_dim: 3 for molecules
    (per-atom force clipping; source noise, bridge noise, SDE increments and the controlled drift all without a
    centre-of-mass component, so a molecule's centre of mass stays where the source put it), D for toys.
    """

    def __init__(
        self,
        potential: Potential,
        noise: EDMNoise,
        config: ASBSConfig,
        *,
        source_std: float | torch.Tensor,
        source_mean: torch.Tensor | None = None,
        cvs: CVSet | None = None,
        bias: WellTemperedBias | None = None,
        atom_dim: int | None = None,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float32,
        generator: torch.Generator | None = None,
    ) -> None:
        if (bias is None) != (cvs is None):
            raise ValueError("bias, cvs: give both (WT-ASBS) or neither (ASBS)")
        if bias is not None and bias.k != len(cvs):
            raise ValueError(f"bias: grid has {bias.k} CVs, cvs has {len(cvs)}")
        self.potential, self.noise, self.config = potential, noise, config
        self.cvs, self.bias = cvs, bias
        self.device, self.dtype = torch.device(device), dtype
        self.dim = potential.dim
        self.atom_dim = atom_dim or self.dim
        if self.dim % self.atom_dim:
            raise ValueError(f"atom_dim: {atom_dim} does not divide D = {self.dim}")
        kw = {"device": self.device, "dtype": dtype}
        std = torch.as_tensor(source_std, **kw)
        if std.shape not in ((), (self.dim,)) or not bool((std > 0).all()):
            raise ValueError(f"source_std: expected a positive std, one or one per coordinate, got {source_std!r}")
        self.source_std = std
        self.source_mean = torch.zeros(self.dim, **kw) if source_mean is None else source_mean.to(**kw).flatten()
        if self.source_mean.numel() != self.dim:
            raise ValueError(f"source_mean: expected {self.dim} values, got {self.source_mean.numel()}")
        self.generator = generator if generator is not None else torch.Generator(self.device).manual_seed(0)
        with seeded_init(self.generator):  # network init from `generator`, global RNG untouched
            self.controller = TimeMLP(self.dim, hidden=config.hidden, zero_out=True).to(**kw)
            self.corrector = MLP(self.dim, self.dim, config.hidden, zero_out=True).to(**kw)
        self.buffers = {"A": None, "C": None}
        self.log = TrainLog()

    @classmethod
    def from_config(
        cls,
        potential: Potential,
        config: SamplerConfig,
        *,
        source_mean: torch.Tensor | None = None,
        bias: WellTemperedBias | None = None,
        cvs: CVSet | None = None,
        atom_dim: int | None = None,
        generator: torch.Generator | None = None,
        source_std: torch.Tensor | None = None,
    ) -> ASBS:
        """The sampler of a `SamplerConfig` on `potential`: WT-ASBS with `bias` and `cvs` (build the bias with
        `config.bias.build(...)` over the CVs' range), plain ASBS without; `source_std`: a per-coordinate std (D,)
        in place of the config's one value."""
        std = config.source_std if source_std is None else source_std
        return cls(
            potential, config.noise(), config.asbs, source_std=std, source_mean=source_mean, cvs=cvs, bias=bias,
            atom_dim=atom_dim, generator=generator,
        )  # fmt: skip

    # sampling -----------------------------------------------------------------------------------------
    @property
    def molecular(self) -> bool:
        """Several 3-D atoms: noise and drift are kept free of a centre-of-mass component."""
        return self.atom_dim == 3 and self.dim > 3

    def _mean_free(self, z: torch.Tensor) -> torch.Tensor:
        """z: (B, D) -> the core's `mean_free` over its (B, D / 3, 3) atoms (molecules); unchanged for toys."""
        return mean_free(z.view(len(z), -1, 3)).view(z.shape) if self.molecular else z

    def _drift(self, *, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        g = self.noise.g(t)[:, None]
        return g * g * self._mean_free(self.controller(x=x, t=t))

    def _source(self, n: int, generator: torch.Generator) -> torch.Tensor:
        z = torch.randn(n, self.dim, generator=generator, device=self.device, dtype=self.dtype)
        return self.source_mean + self.source_std * self._mean_free(z)

    def _simulate(self, n: int, generator: torch.Generator | None, *, trajectory: bool = False):
        """(X_0: (n, D), X_1: (n, D) or, with `trajectory`, the whole `Trajectory`) of the controlled SDE."""
        gen = generator if generator is not None else self.generator
        x0 = self._source(n, gen)
        grid = uniform(self.config.sde_steps).to(self.device)
        out = solve_sde(
            self._drift, self.noise.g, x0, grid, generator=gen, noise_projection=self._mean_free,
            return_trajectory=trajectory,
        )  # fmt: skip
        return x0, out

    @torch.no_grad()
    def sample(self, n: int, *, generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Draw n samples from the current controlled SDE: (X_0, X_1), each (n, D)."""
        return self._simulate(n, generator)

    @torch.no_grad()
    def sample_weighted(
        self, n: int, *, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """n samples with path-space importance weights for the unbiased Boltzmann density e^{-E/kT}:
        (X_0, X_1, log_w), X_0, X_1: (n, D), log_w: (n,) float64 up to a constant (self-normalise); one energy
        call per sample. See `path_log_weights`."""
        x0, traj = self._simulate(n, generator, trajectory=True)
        return x0, traj.final, self.path_log_weights(traj)

    @torch.no_grad()
    def path_log_weights(self, traj: Trajectory) -> torch.Tensor:
        """log w: (n,) float64, up to a constant, of the paths traj.states: (K + 1, n, D) of this sampler's chain.

        For the Euler-Maruyama chain X_{k+1} = X_k + g_k^2 b_k h_k + g_k sqrt(h_k) z_k (g at the step's left time),
        the path measure Q = mu(X_0) P_base(path | X_0) e^{-E(X_1)/kT} / p_base(X_1 | X_0) has X_1-marginal
        e^{-E/kT} / Z for any source mu, so log w = log dQ/dP_u = sum_k (g_k^2 h_k |b_k|^2 / 2 - b_k . dX_k)
        - E(X_1)/kT + |X_1 - X_0|^2 / (2 S), S = sum_k g_k^2 h_k: exact for the discrete chain, whatever b has
        learnt, so the weights correct the sampler's errors, the bias included (V does not enter). Molecules: every
        increment lies in the mean-free subspace, where the same formula holds. Paths with a non-finite energy get
        weight 0; a ValueError if none is left.
        """
        states, times = traj.states, traj.times
        n = states.shape[1]
        log_w = torch.zeros(n, dtype=torch.float64, device=states.device)
        total_var = 0.0
        for k in range(len(times) - 1):
            g2h = float(self.noise.g(times[k]) ** 2 * (times[k + 1] - times[k]))
            b = self._mean_free(self.controller(x=states[k], t=times[k].expand(n))).double()
            dx = (states[k + 1] - states[k]).double()
            log_w += 0.5 * g2h * b.square().sum(-1) - (b * dx).sum(-1)
            total_var += g2h
        x0, x1 = states[0], states[-1]
        energy = self.potential.energy_and_forces(x1).energy.to(log_w)
        log_w += -energy / self.potential.kT + (x1 - x0).double().square().sum(-1) / (2 * total_var)
        log_w = torch.where(torch.isfinite(energy) & torch.isfinite(log_w), log_w, -torch.inf)
        if not bool(torch.isfinite(log_w).any()):
            raise ValueError("path_log_weights: no sample has a finite energy and weight")
        return log_w

    def total_grad(self, x: torch.Tensor, grad_e: torch.Tensor | None = None) -> torch.Tensor:
        """grad (E + V)(x) / kT, clipped per atom: (B, D). grad_e: precomputed dE/dx (else one energy call)."""
        if grad_e is None:
            grad_e = -self.potential.energy_and_forces(x).forces
        grad = grad_e
        if self.bias is not None:
            bv = self.bias(self.cvs(x.to(self.bias.values)))
            grad = grad + self.cvs.pullback(x, bv.grad).to(grad)
        grad = torch.nan_to_num(grad / self.potential.kT, nan=0.0, posinf=0.0, neginf=0.0)
        return clip_per_atom(grad, self.config.force_clip, self.atom_dim)

    # training ----------------------------------------------------------------------------------------
    def _refresh(self, stage: str, epoch: int) -> float:
        """Draw the epoch's new samples into the stage's buffer (with dE/dx for 'A'; hills for WT-ASBS); returns
        their median energy / kT ('A'), NaN ('C')."""
        x0, x1 = self.sample(self.config.new_samples)
        median = math.nan
        if stage == "A":
            ef = self.potential.energy_and_forces(x1)
            median = float(ef.energy.nanmedian()) / self.potential.kT
            new = (x0, x1, torch.nan_to_num(-ef.forces.to(x1), nan=0.0, posinf=0.0, neginf=0.0))
        else:
            new = (x0, x1)
        old = self.buffers[stage]
        buf = new if old is None else tuple(torch.cat([o, n])[-self.config.buffer_size :] for o, n in zip(old, new))
        self.buffers[stage] = buf
        if self.bias is not None and epoch >= self.config.skip_epochs:
            self.bias.add_hills(self.cvs(x1.to(self.bias.values)))
        return median

    def _batch(self, stage: str, generator: torch.Generator) -> tuple[torch.Tensor, ...]:
        """batch_size rows drawn with replacement from the stage's buffer: (X_0, X_1[, dE/dx(X_1)]), each (B, D)."""
        buf = self.buffers[stage]
        idx = torch.randint(0, len(buf[0]), (self.config.batch_size,), generator=generator, device=self.device)
        return tuple(b[idx] for b in buf)

    def _loss(
        self, net: nn.Module, batch: tuple[torch.Tensor, ...], generator: torch.Generator
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """fit's loss: corrector matching on a (X_0, X_1) batch, adjoint matching (t and the bridge noise drawn from
        `generator`) on a (X_0, X_1, dE/dx) batch; `net` is the network being trained. Returns (loss, {})."""
        if len(batch) == 2:
            x0, x1 = batch
            target = (x0 - x1) / self.noise.total
            return ((net(x1) - target) ** 2).sum(-1).mean(), {}
        x0, x1, grad_e = batch
        t = torch.rand(len(x0), generator=generator, device=self.device, dtype=self.dtype)
        xt = self.bridge_sample(x0, x1, t)
        with torch.no_grad():
            c = self.total_grad(x1, grad_e) + self.corrector(x1)
        return ((net(x=xt, t=t) + c) ** 2).sum(-1).mean(), {}

    def bridge_sample(
        self, x0: torch.Tensor, x1: torch.Tensor, t: torch.Tensor, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """X_t of the base bridge: (1 - r) X_0 + r X_1 + sqrt(r (1 - r) V_tot) z, r = S(t) / V_tot; x0, x1: (B, D),
        t: (B,) -> (B, D) in x1's dtype; z from `generator` (default the sampler's) in x1's dtype.

        The same law as core `BridgePath(noise.variance)` (checked in the tests) in closed form, without its
        forward-mode derivative (the time derivative is not needed here). The mixture is formed in float64 with
        1 - r = (V_tot - S(t)) / V_tot from `remaining`: near t = 1 it is far below float32's resolution of r.
        """
        gen = self.generator if generator is None else generator
        z = self._mean_free(torch.randn(x1.shape, generator=gen, device=x1.device, dtype=x1.dtype)).double()
        keep = (self.noise.remaining(t.double()) / self.noise.total)[:, None]  # 1 - r
        xt = keep * x0.double() + (1 - keep) * x1.double() + (keep * (1 - keep) * self.noise.total).sqrt() * z
        return xt.to(x1.dtype)

    def warm_start(self, data: torch.Tensor) -> float:
        """Bridge-match the controller onto `data`: (N, D) (e.g. short MD in the sampler's coordinates) for the
        config's `warm_start_steps` AdamW steps from `warm_start_lr` down a cosine, batches of `batch_size`;
        returns the last loss.

        Pairs are independent: X_0 from the source, X_1 from `data`; X_t from the base bridge and the target is
        the bridge's drift (X_1 - X_t) / (V_tot - S(t)) (mean-free for molecules), whose Markovian projection
        carries the source to the data. The loss weights each pair by 1 - r(t), which keeps the target's variance
        bounded as t -> 1. No energy calls."""
        cfg = self.config
        if cfg.warm_start_steps < 1:
            raise ValueError("warm_start: the config's warm_start_steps is 0 (no warm start)")
        data = torch.as_tensor(data)
        if data.dim() != 2 or data.shape[1] != self.dim or len(data) < 1:
            raise ValueError(f"data: expected samples of shape (N, {self.dim}), got {tuple(data.shape)}")
        if not bool(torch.isfinite(data).all()):
            raise ValueError("data: expected finite samples, got NaN or inf")
        data = data.to(device=self.device, dtype=self.dtype)

        def batch(step: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
            idx = torch.randint(0, len(data), (cfg.batch_size,), generator=generator, device=self.device)
            return self._source(cfg.batch_size, generator), data[idx]

        def loss(net: nn.Module, pair: tuple[torch.Tensor, torch.Tensor], generator: torch.Generator):
            # the bridge and its target in float64 (1 - r(t) from `remaining`, as in `bridge_sample`)
            x0, x1 = (x.double() for x in pair)
            t = torch.rand(len(x0), generator=generator, device=self.device, dtype=torch.float64)
            keep = (self.noise.remaining(t) / self.noise.total)[:, None]  # 1 - r
            xt = self.bridge_sample(x0, x1, t, generator)
            # sqrt(1 - r) times the target (X_1 - X_t) / (V_tot - S(t)): bounded as t -> 1
            scaled_target = self._mean_free(x1 - xt) / (keep.sqrt() * self.noise.total)
            b = net(x=xt.to(self.dtype), t=t.to(self.dtype))
            return ((keep.sqrt().to(self.dtype) * b - scaled_target.to(self.dtype)) ** 2).sum(-1).mean(), {}

        opt = torch.optim.AdamW(self.controller.parameters(), lr=cfg.warm_start_lr, weight_decay=cfg.weight_decay)
        cosine = torch.optim.lr_scheduler.CosineAnnealingLR(opt, cfg.warm_start_steps)
        result = fit(
            self.controller, loss, batch, steps=cfg.warm_start_steps, optimizer=opt, lr_schedule=cosine,
            grad_clip=cfg.grad_clip,
            device=self.device, generator=self.generator, log_every=cfg.warm_start_steps, progress=False,
        )  # fmt: skip
        return float(result.history[-1]["loss"])

    def train(self, on_epoch: Callable[[TrainLog], None] | None = None) -> TrainLog:
        """Run the curriculum, each epoch one `fit` of `steps_per_epoch` AdamW steps on the epoch's buffer (the
        optimisers persist across epochs and stages), calling `on_epoch(log)` after each epoch's records (progress);
        returns the `TrainLog` (also at `.log`). With `stop_above_kT` a diverging run stops early (`stopped_epoch`)."""
        cfg = self.config
        nets: dict[str, nn.Module] = {"A": self.controller, "C": self.corrector}
        opts = {
            k: torch.optim.AdamW(net.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay) for k, net in nets.items()
        }
        start, epoch, lowest, above = time.perf_counter(), 0, math.inf, 0
        for stage in cfg.stages:
            n_epochs = cfg.adjoint_epochs if stage == "A" else cfg.corrector_epochs
            self.buffers[stage] = None  # a fresh buffer per stage: the other network changed
            for _ in range(n_epochs):
                median = self._refresh(stage, epoch)
                result = fit(
                    nets[stage],
                    self._loss,
                    lambda step, generator, stage=stage: self._batch(stage, generator),
                    steps=cfg.steps_per_epoch,
                    optimizer=opts[stage],
                    grad_clip=cfg.grad_clip,
                    device=self.device,
                    generator=self.generator,
                    log_every=cfg.steps_per_epoch,
                    progress=False,
                )
                self.log.stage.append(stage)
                self.log.loss.append(result.history[-1]["loss"])
                self.log.energy_evals.append(self.potential.n_evals)
                self.log.hills.append(0 if self.bias is None else self.bias.n_hills)
                self.log.max_bias.append(0.0 if self.bias is None else float(self.bias.values.max()))
                self.log.median_energy_kT.append(median)
                epoch += 1
                if on_epoch is not None:
                    on_epoch(self.log)
                if stage == "A" and cfg.stop_above_kT > 0:
                    lowest = min(lowest, median) if math.isfinite(median) else lowest
                    above = 0 if median <= lowest + cfg.stop_above_kT else above + 1  # NaN (all failed) counts
                    if above >= cfg.stop_patience:
                        self.log.stopped_epoch = epoch
                        break
            if self.log.stopped_epoch is not None:
                break
        self.log.seconds = time.perf_counter() - start
        return self.log

    def state_dict(self) -> dict[str, object]:
        """Tensors only: the two networks and (for WT-ASBS) the bias grids."""
        state: dict[str, object] = {
            "controller": self.controller.state_dict(),
            "corrector": self.corrector.state_dict(),
        }
        if self.bias is not None:
            state["bias"] = self.bias.state_dict()
        return state
