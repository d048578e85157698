"""The certificate study end to end: generate PDE data, train the regressor Psi (FNO), a deep ensemble, the joint and
input-only score models, calibrate on held-out ID samples, and score every OOD family with the certificate and every
baseline. Returns one metrics table per OOD family (Spearman/Pearson of -score vs relative L1 error, AUROC,
balanced ACC and FPR at the median - 1.5 std threshold) and the certificate's CPU latency."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from flowlab.core.config import Config
from flowlab.core.metrics import pearson, spearman
from flowlab.core.train import load_weights
from flowlab.trust_ood.certificate.baselines import ensemble_score, mc_dropout_score, score_norm_statistic
from flowlab.trust_ood.certificate.joint_model import JointScoreModel, train_score_model
from flowlab.trust_ood.certificate.metrics import acc_fpr_at_threshold, auroc, relative_l1
from flowlab.trust_ood.certificate.names import FAMILIES, METHODS, PDE, Regressor
from flowlab.trust_ood.certificate.pde1d import PDEConfig, PDEData, generate
from flowlab.trust_ood.certificate.regressors import CNN1d, FNO1d, train_regressor
from flowlab.trust_ood.certificate.score import DensityModels, ErrorModel, Spacing, calibrate_threshold, certificate

__all__ = [
    "METHODS",
    "StudyConfig",
    "StudyModels",
    "StudyResult",
    "evaluate_study",
    "load_study",
    "measure_latency",
    "run_study",
    "save_study",
    "to_tensors",
    "train_study",
]

OOD_FAMILIES = tuple(f for f in FAMILIES if f != "id")


@dataclass(frozen=True)
class StudyConfig(Config):
    """One study: the PDE and its grid size `n`; `train_pairs` ID pairs train the `ensemble_size` regressors (the
    first is Psi; `regressor`: FNO with `fno_modes` or CNN, `regressor_width` channels, `regressor_steps` steps) and
    the joint and input-only score models (`score_channels`, VE `sigma`, `score_steps` steps), all in batches of
    `batch_size`; `calib` held-out ID samples set the thresholds, `test_per_family` samples per family are scored;
    the likelihood ODE takes `ode_steps` `ode_method` steps on the `ode_spacing` grid with `num_probes` Hutchinson
    probes; MC dropout takes `mc_passes` passes. `seed` seeds the data sets (a benchmark sets it to the run's)."""

    pde: PDE = "heat"
    n: int = 32
    train_pairs: int = 1000
    calib: int = 32
    test_per_family: int = 128
    regressor_steps: int = 400
    ensemble_size: int = 5
    score_steps: int = 800
    score_channels: tuple[int, ...] = (16, 32)
    sigma: float = 50.0
    batch_size: int = 64
    ode_steps: int = 16
    ode_spacing: Spacing = "log_sigma"
    ode_method: str = "rk4"
    num_probes: int = 2
    mc_passes: int = 20
    fno_modes: int = 8
    regressor_width: int = 16
    regressor: Regressor = "fno"
    seed: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.ode_steps < 1:
            raise ValueError(f"ode_steps: expected a positive int, got {self.ode_steps!r}")

    def pde_config(self) -> PDEConfig:
        return PDEConfig.default(self.pde, self.n)

    def ode_options(self) -> dict:
        """The likelihood-ODE keywords of `certificate`: steps, spacing, method, probes."""
        return dict(steps=self.ode_steps, spacing=self.ode_spacing, method=self.ode_method, num_probes=self.num_probes)

    def make_regressor(self) -> nn.Module:
        """A fresh Psi: FNO1d(fno_modes, regressor_width, 3 layers) or CNN1d(regressor_width, 4 layers), dropout 0.1."""
        if self.regressor == "cnn":
            return CNN1d(width=self.regressor_width, layers=4, dropout=0.1)
        return FNO1d(modes=self.fno_modes, width=self.regressor_width, layers=3, dropout=0.1)


@dataclass
class StudyModels:
    config: StudyConfig
    regressor: nn.Module
    ensemble: list[nn.Module]
    joint: JointScoreModel
    input: JointScoreModel
    param_scale: float
    timings: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class StudyResult:
    tables: dict[str, dict[str, dict[str, float]]]  # family -> method -> metric -> value
    id_error: float
    thresholds: dict[str, float]
    error_model: ErrorModel
    timings: dict[str, float]


def to_tensors(data: PDEData, param_scale: float, device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(x (B, 1, N), param / param_scale (B,), y (B, 1, N)) float32 tensors."""
    x = torch.tensor(data.u0, dtype=torch.float32, device=device)[:, None]
    y = torch.tensor(data.u_final, dtype=torch.float32, device=device)[:, None]
    return x, torch.tensor(data.param / param_scale, dtype=torch.float32, device=device), y


def _stats(z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return z.mean(dim=(0, 2)), z.std(dim=(0, 2))


def train_study(config: StudyConfig, *, device, generator: torch.Generator, progress: bool = False) -> StudyModels:
    """Train Psi (FNO with dropout), the other ensemble members, and the joint/input score models on ID pairs.

    The joint model is trained on (x, y) with y the ground-truth solution; at test time it scores (x, Psi(x))."""
    pde = config.pde_config()
    param_scale = float(np.mean(pde.param_range))
    train = generate(pde, "id", config.train_pairs, seed=config.seed)
    x, p, y = to_tensors(train, param_scale, device)
    timings: dict[str, float] = {}

    t0 = time.perf_counter()
    members = []
    for _ in range(config.ensemble_size):
        torch.manual_seed(int(torch.randint(0, 2**62, (1,), generator=generator)))
        member = train_regressor(config.make_regressor(), x, p, y, steps=config.regressor_steps,
                                 batch_size=config.batch_size, device=device, generator=generator,
                                 progress=progress)  # fmt: skip
        members.append(member)
    timings["train_regressors_s"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    z = torch.cat([x, y], dim=1)
    mean, std = _stats(z)
    models = {}
    for name, fields, m, s in (("joint", z, mean, std), ("input", x, mean[:1], std[:1])):
        torch.manual_seed(int(torch.randint(0, 2**62, (1,), generator=generator)))
        model = JointScoreModel(fields.shape[1], config.n, sigma=config.sigma, net_channels=config.score_channels,
                                time_dim=32, mean=m, std=s).to(device)  # fmt: skip
        models[name] = train_score_model(model, fields, steps=config.score_steps, batch_size=config.batch_size,
                                         device=device, generator=generator, progress=progress)  # fmt: skip
    timings["train_score_models_s"] = time.perf_counter() - t0
    return StudyModels(config, members[0], members, models["joint"], models["input"], param_scale, timings)


def _scores(models: StudyModels, x, p, *, generator) -> dict[str, torch.Tensor]:
    cfg = models.config
    dens = DensityModels(joint=models.joint, input=models.input)
    opts = cfg.ode_options()
    g = torch.Generator().manual_seed(int(torch.randint(0, 2**62, (1,), generator=generator)))
    joint = certificate(dens, models.regressor, x, p, variant="x&y", generator=g, **opts)
    inp = certificate(dens, models.regressor, x, p, variant="x", generator=_copy(g), **opts)
    # the same probes as the two calls above: y|x = joint - input by construction
    cond_logp = joint.log_prob - inp.log_prob
    fields = torch.cat([x, joint.prediction], dim=1)
    return {
        "joint": joint.score,
        "input_only": inp.score,
        "conditional": cond_logp / (x[0].numel() * math.log(2)),
        "mc_dropout": mc_dropout_score(models.regressor, x, p, passes=cfg.mc_passes, generator=generator),
        "ensemble": ensemble_score(models.ensemble, x, p),
        "score_norm": score_norm_statistic(models.joint, fields, generator=generator),
        "prediction": joint.prediction,
    }


def _copy(g: torch.Generator) -> torch.Generator:
    c = torch.Generator(g.device)
    c.set_state(g.get_state())
    return c


def evaluate_study(models: StudyModels, *, device, generator: torch.Generator) -> StudyResult:
    """Calibrate thresholds on `calib` held-out ID samples and build one table per OOD family."""
    cfg = models.config
    pde = cfg.pde_config()
    sets = {"calib": generate(pde, "id", cfg.calib, seed=cfg.seed + 1)}
    for i, fam in enumerate(FAMILIES):
        sets[fam] = generate(pde, fam, cfg.test_per_family, seed=cfg.seed + 2 + i)
    timings = dict(models.timings)
    t0 = time.perf_counter()
    scored, errors = {}, {}
    train_norm = None
    for name, data in sets.items():
        x, p, y = to_tensors(data, models.param_scale, device)
        scored[name] = _scores(models, x, p, generator=generator)
        if train_norm is None:
            train_norm = float(y.abs().flatten(1).sum(1).median())
        errors[name] = relative_l1(scored[name]["prediction"], y, floor=0.1 * train_norm)
    timings["score_all_s"] = time.perf_counter() - t0
    thresholds = {m: calibrate_threshold(scored["calib"][m]) for m in METHODS}
    tables: dict[str, dict[str, dict[str, float]]] = {}
    for fam in OOD_FAMILIES:
        err = torch.cat([errors["id"], errors[fam]])
        tables[fam] = {}
        for m in METHODS:
            s_id, s_ood = scored["id"][m], scored[fam][m]
            acc, fpr = acc_fpr_at_threshold(s_id, s_ood, thresholds[m])
            both = torch.cat([s_id, s_ood])
            tables[fam][m] = {
                "auroc": auroc(s_id, s_ood),
                "acc": acc,
                "fpr": fpr,
                "spearman": spearman(-both, err),
                "pearson": pearson(-both, err),
                "rel_l1_error": float(errors[fam].mean()),
            }
    all_scores = torch.cat([scored[f]["joint"] for f in FAMILIES])
    all_errors = torch.cat([errors[f] for f in FAMILIES])
    return StudyResult(tables, float(errors["id"].mean()), thresholds, ErrorModel.fit(all_scores, all_errors), timings)


def measure_latency(models: StudyModels, *, batch: int = 256, device, generator: torch.Generator) -> dict[str, float]:
    """Wall seconds of the joint certificate for one sample and for a batch of `batch` (CPU unless `device`)."""
    cfg = models.config
    data = generate(cfg.pde_config(), "id", batch, seed=cfg.seed + 99)
    x, p, _ = to_tensors(data, models.param_scale, device)
    dens = DensityModels(joint=models.joint)
    opts = dict(cfg.ode_options(), generator=generator)
    t0 = time.perf_counter()
    certificate(dens, models.regressor, x[:1], p[:1], **opts)
    one = time.perf_counter() - t0
    t0 = time.perf_counter()
    certificate(dens, models.regressor, x, p, **opts)
    full = time.perf_counter() - t0
    return {"latency_single_s": one, f"latency_batch{batch}_s": full, "latency_per_sample_in_batch_s": full / batch}


def run_study(config: StudyConfig, *, device="cpu", generator: torch.Generator, progress: bool = False):
    models = train_study(config, device=device, generator=generator, progress=progress)
    result = evaluate_study(models, device=device, generator=generator)
    return models, result


def save_study(models: StudyModels, directory) -> None:
    """Write the study's models as tensors only (state_dicts) plus `config.json` into `directory`."""
    import json
    from pathlib import Path

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    for i, m in enumerate(models.ensemble):
        torch.save(m.state_dict(), out / f"regressor_{i}.pt")
    torch.save(models.joint.state_dict(), out / "joint.pt")
    torch.save(models.input.state_dict(), out / "input.pt")
    meta = {"study": models.config.to_dict(), "param_scale": models.param_scale, "timings": models.timings}
    (out / "config.json").write_text(json.dumps(meta, indent=2))


def load_study(directory, *, device="cpu") -> StudyModels:
    """Read back what `save_study` wrote (`load_weights`: tensors only); a missing, corrupt or foreign file, or weights
    that do not fit the study config.json describes, is one error naming the file."""
    import json
    from pathlib import Path

    src = Path(directory)
    record = src / "config.json"
    if not record.is_file():
        raise FileNotFoundError(f"run: no trained study in {src} (config.json missing); run `flowlab trust train`")
    try:
        meta = json.loads(record.read_text())
        cfg = StudyConfig.from_mapping(meta["study"])
        cfg.pde_config()
        param_scale, timings = float(meta["param_scale"]), dict(meta["timings"])
        if not (math.isfinite(param_scale) and param_scale > 0):
            raise ValueError(f"param_scale: expected a positive finite scale, got {param_scale}")
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(
            f"run: {record} is not a study of `flowlab trust train` ({type(err).__name__}: {err})"
        ) from None

    def load(module: nn.Module, name: str) -> nn.Module:
        try:
            module.load_state_dict(load_weights(src / name, map_location=device, name="run"))
        except RuntimeError as err:  # tensors of other names or shapes than the model's
            first = str(err).strip().splitlines()[0]
            raise ValueError(f"run: {src / name} does not fit the study {record} describes ({first})") from None
        return module.to(device).eval()

    members = [load(cfg.make_regressor(), f"regressor_{i}.pt") for i in range(cfg.ensemble_size)]
    joint = load(JointScoreModel(2, cfg.n, sigma=cfg.sigma, net_channels=cfg.score_channels, time_dim=32), "joint.pt")
    inp = load(JointScoreModel(1, cfg.n, sigma=cfg.sigma, net_channels=cfg.score_channels, time_dim=32), "input.pt")
    return StudyModels(cfg, members[0], members, joint, inp, param_scale, timings)
