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
    "load_weights_into",
    "measure_latency",
    "run_study",
    "save_study",
    "to_tensors",
    "train_models",
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
    probes; MC dropout takes `mc_passes` passes. `seed` seeds the data sets (a benchmark sets it to the run's).
    `pde` None: a study on the user's own arrays of grid size `n` (`user_study.fit_certificate`), with no PDE to
    generate data from."""

    pde: PDE | None = "heat"
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
        """The default `PDEConfig` of this study's PDE at grid size `n`; ValueError for a study trained on the user's
        arrays."""
        if self.pde is None:
            raise ValueError("pde: this study was trained on the user's arrays; it has no PDE to generate data from")
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
    """Psi (`regressor`, the first of the `ensemble`; the ensemble is [Psi] alone when Psi was given, not trained),
    the `joint` and `input` score models, the scale of the task parameter Psi sees, the training `timings`, and for
    a study on the user's arrays the held-out ID inputs `calib_inputs`: (calib, 1, n) that set the threshold (a PDE
    study generates them)."""

    config: StudyConfig
    regressor: nn.Module
    ensemble: list[nn.Module]
    joint: JointScoreModel
    input: JointScoreModel
    param_scale: float
    timings: dict[str, float] = field(default_factory=dict)
    calib_inputs: torch.Tensor | None = None


@dataclass(frozen=True)
class StudyResult:
    """What `evaluate_study` measured: per OOD family and method the detection metrics (tables), the regressor's
    in-distribution error, each certified variant's threshold, the fitted error model and the timings (s)."""

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
    """Train Psi (FNO with dropout), the other ensemble members, and the joint/input score models on ID pairs of the
    config's PDE (`train_models` on `train_pairs` generated pairs)."""
    pde = config.pde_config()
    param_scale = float(np.mean(pde.param_range))
    x, p, y = to_tensors(generate(pde, "id", config.train_pairs, seed=config.seed), param_scale, device)
    return train_models(config, x, p, y, param_scale=param_scale, device=device, generator=generator, progress=progress)


def train_models(
    config: StudyConfig,
    x: torch.Tensor,
    param: torch.Tensor,
    y: torch.Tensor,
    *,
    param_scale: float,
    regressor: nn.Module | None = None,
    calib_inputs: torch.Tensor | None = None,
    device,
    generator: torch.Generator,
    progress: bool = False,
) -> StudyModels:
    """The study's models trained on ID pairs x, y: (B, 1, n) with task parameters param: (B,) (already divided by
    `param_scale`): the `ensemble_size` regressors (the first is Psi) unless `regressor` gives Psi, then the joint
    model on (x, y) and the input-only model on x. The joint model learns the ground truth y; at test time it
    scores (x, Psi(x)). `calib_inputs` (calib, 1, n) are kept for the threshold of a study on the user's arrays."""
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    members = [] if regressor is None else [regressor]
    for _ in range(config.ensemble_size - len(members)):
        torch.manual_seed(int(torch.randint(0, 2**62, (1,), generator=generator)))
        member = train_regressor(config.make_regressor(), x, param, y, steps=config.regressor_steps,
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
    return StudyModels(
        config, members[0], members, models["joint"], models["input"], param_scale, timings, calib_inputs
    )


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
    """(the trained `StudyModels`, their `StudyResult`): `train_study` then `evaluate_study` with one generator."""
    models = train_study(config, device=device, generator=generator, progress=progress)
    result = evaluate_study(models, device=device, generator=generator)
    return models, result


def save_study(models: StudyModels, directory) -> None:
    """Write the study's models as tensors only (state_dicts; `calib.pt` the calibration inputs of a study on the
    user's arrays) plus `config.json` into `directory`. Psi must be the package's own (FNO1d or CNN1d): a regressor
    of the user's is theirs to save."""
    import json
    from pathlib import Path

    foreign = [type(m).__name__ for m in models.ensemble if not isinstance(m, FNO1d | CNN1d)]
    if foreign:
        raise ValueError(f"models: save_study saves the package's Psi (FNO1d, CNN1d), not {foreign[0]}; keep your own")
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    for i, m in enumerate(models.ensemble):
        torch.save(m.state_dict(), out / f"regressor_{i}.pt")
    torch.save(models.joint.state_dict(), out / "joint.pt")
    torch.save(models.input.state_dict(), out / "input.pt")
    if models.calib_inputs is not None:
        torch.save({"inputs": models.calib_inputs.cpu()}, out / "calib.pt")
    meta = {"study": models.config.to_dict(), "param_scale": models.param_scale, "timings": models.timings}
    (out / "config.json").write_text(json.dumps(meta, indent=2))


def load_weights_into(module: nn.Module, path, *, device, name: str, fits: str) -> nn.Module:
    """`module` holding the tensors of `path` (`load_weights`: tensors only), on `device` in eval mode. A missing,
    corrupt or pickled file, weights that are not finite, or weights that do not fit the module (described by
    `fits`, e.g. "the study config.json describes") is one ValueError starting `name: `."""
    state = load_weights(path, map_location=device, name=name)
    try:
        module.load_state_dict(state)
    except (RuntimeError, TypeError, AttributeError) as err:  # tensors of other names or shapes, or no state_dict
        first = str(err).strip().splitlines()[0]
        raise ValueError(f"{name}: {path} does not fit {fits} ({first})") from None
    if not all(bool(torch.isfinite(t).all()) for t in module.state_dict().values() if t.is_floating_point()):
        raise ValueError(f"{name}: {path} holds NaN or inf weights")
    return module.to(device).eval()


def _calib_inputs(path, cfg: StudyConfig, *, device) -> torch.Tensor:
    """The calibration inputs (calib, 1, n) that `save_study` wrote to `path`."""
    saved = load_weights(path, map_location=device, name="run")
    inputs = saved.get("inputs") if isinstance(saved, dict) else None
    if not isinstance(inputs, torch.Tensor) or tuple(inputs.shape) != (cfg.calib, 1, cfg.n):
        raise ValueError(f"run: {path} does not hold the study's calibration inputs of shape ({cfg.calib}, 1, {cfg.n})")
    if not bool(torch.isfinite(inputs).all()):
        raise ValueError(f"run: {path} holds NaN or inf calibration inputs")
    return inputs.float()


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
        if cfg.pde is not None:
            cfg.pde_config()
        param_scale, timings = float(meta["param_scale"]), dict(meta["timings"])
        if not (math.isfinite(param_scale) and param_scale > 0):
            raise ValueError(f"param_scale: expected a positive finite scale, got {param_scale}")
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(
            f"run: {record} is not a study of `flowlab trust train` ({type(err).__name__}: {err})"
        ) from None

    def load(module: nn.Module, name: str) -> nn.Module:
        return load_weights_into(module, src / name, device=device, name="run", fits=f"the study {record} describes")

    members = [load(cfg.make_regressor(), f"regressor_{i}.pt") for i in range(cfg.ensemble_size)]
    joint = load(JointScoreModel(2, cfg.n, sigma=cfg.sigma, net_channels=cfg.score_channels, time_dim=32), "joint.pt")
    inp = load(JointScoreModel(1, cfg.n, sigma=cfg.sigma, net_channels=cfg.score_channels, time_dim=32), "input.pt")
    calib = None if cfg.pde is not None else _calib_inputs(src / "calib.pt", cfg, device=device)
    return StudyModels(cfg, members[0], members, joint, inp, param_scale, timings, calib)
