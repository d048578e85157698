"""The certificate of a user's own regressor on the user's own arrays: score models trained on their in-distribution
pairs (`fit_certificate`), then new inputs certified against the threshold of held-out ID inputs (`certify`).

    models = fit_certificate(inputs, outputs, regressor=my_net, generator=torch.Generator().manual_seed(0))
    result = certify(models, new_inputs)   # result.scores (B,), result.threshold, result.ood (B,)

Arrays are (N, n): one field on a grid of n points per row (`arrays`). The user's regressor maps inputs (B, n) to
outputs (B, n); without one, the package's own Psi (`StudyConfig.regressor`) and its ensemble are trained on the
pairs, as in a PDE study. The study is the PDE study's (`evaluate.train_models`, `save_study`, `load_study`), with
`StudyConfig.pde` None: no task parameter (Psi sees zero), and `calib` pairs held out at random for the threshold.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import torch
from torch import nn

from flowlab.trust_ood.certificate.arrays import check_fields
from flowlab.trust_ood.certificate.evaluate import StudyConfig, StudyModels, train_models
from flowlab.trust_ood.certificate.regressors import CNN1d, FNO1d
from flowlab.trust_ood.certificate.score import DensityModels, calibrate_threshold, certificate

__all__ = [
    "ArrayRegressor",
    "Certification",
    "array_study_config",
    "calibrated_certificate",
    "certify",
    "fit_certificate",
]


class ArrayRegressor(nn.Module):
    """A user's regressor on arrays, `regressor(inputs (B, n)) -> (B, n)`, called in the package's convention
    `psi(x (B, 1, n), param (B,)) -> (B, 1, n)` (param unused: the user's arrays carry no task parameter)."""

    def __init__(self, regressor: nn.Module | Callable[[torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        self.regressor = regressor

    def forward(self, x: torch.Tensor, param: torch.Tensor) -> torch.Tensor:
        """x: (B, 1, n), param: (B,) (unused) -> `regressor(x[:, 0])` as (B, 1, n), checked to match its input's
        shape."""
        out = self.regressor(x[:, 0])
        if not isinstance(out, torch.Tensor) or out.shape != x[:, 0].shape:
            shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            raise ValueError(
                f"regressor: expected outputs of shape {tuple(x[:, 0].shape)} like its inputs, got {shape}"
            )
        return out[:, None]


@dataclass(frozen=True)
class Certification:
    """scores: (B,) the certificate in bits per dimension (higher = more trusted); threshold: median - 1.5 std of the
    held-out ID scores; ood: (B,) bool, scores < threshold; predictions: (B, n) Psi's outputs; variant."""

    scores: torch.Tensor
    threshold: float
    ood: torch.Tensor
    predictions: torch.Tensor
    variant: str


def _numpy(array) -> np.ndarray:
    return array.detach().cpu().numpy() if isinstance(array, torch.Tensor) else np.asarray(array)


def array_study_config(config: StudyConfig, shape: tuple[int, int], *, own_regressor: bool) -> StudyConfig:
    """The `config` of a study on (N, n) arrays of `shape`: no PDE, grid n, N - calib training pairs, and an
    ensemble of one when Psi is the user's (`own_regressor`). n must suit the score network (divisible by
    2^(levels - 1)) and N leave at least two training pairs."""
    count, n = shape
    factor = 2 ** (len(config.score_channels) - 1)
    if n % factor:
        raise ValueError(f"inputs: grid size {n} is not divisible by {factor}, as the score network's levels need")
    if config.calib < 2:
        raise ValueError(f"calib: expected at least 2 held-out pairs for the threshold, got {config.calib}")
    if count < config.calib + 2:
        raise ValueError(f"inputs: {count} pairs; expected at least {config.calib + 2} ({config.calib} held out)")
    ensemble = 1 if own_regressor else config.ensemble_size
    return replace(config, pde=None, n=n, train_pairs=count - config.calib, ensemble_size=ensemble)


def fit_certificate(
    inputs,
    outputs,
    *,
    regressor: nn.Module | Callable[[torch.Tensor], torch.Tensor] | None = None,
    config: StudyConfig = StudyConfig(),
    device="cpu",
    generator: torch.Generator,
    progress: bool = False,
) -> StudyModels:
    """Train the joint and input-only score models on the ID pairs (inputs, outputs): (N, n) arrays or tensors,
    outputs the true ones (not Psi's), holding out `config.calib` random inputs (seed `config.seed`) for the
    threshold. `regressor` is Psi, (B, n) -> (B, n) on `device` (the package's FNO1d and CNN1d in their own
    convention, with param 0); None trains the package's Psi and ensemble on the pairs. Model sizes and steps come
    from `config` (`array_study_config` sets the rest). `save_study` saves the result when Psi is the package's."""
    inputs = check_fields(_numpy(inputs), "inputs")
    outputs = check_fields(_numpy(outputs), "outputs", like=inputs)
    cfg = array_study_config(config, inputs.shape, own_regressor=regressor is not None)
    order = np.random.default_rng(cfg.seed).permutation(len(inputs))
    held, train = order[: cfg.calib], order[cfg.calib :]

    def fields(a: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(a, device=device)[:, None]

    psi = regressor if regressor is None or isinstance(regressor, FNO1d | CNN1d) else ArrayRegressor(regressor)
    return train_models(cfg, fields(inputs[train]), torch.zeros(len(train), device=device), fields(outputs[train]),
                        param_scale=1.0, regressor=psi, calib_inputs=fields(inputs[held]), device=device,
                        generator=generator, progress=progress)  # fmt: skip


def calibrated_certificate(
    models: StudyModels,
    x: torch.Tensor,
    param: torch.Tensor,
    calib_x: torch.Tensor,
    calib_param: torch.Tensor,
    *,
    variant: str = "x&y",
    generator: torch.Generator | None = None,
) -> Certification:
    """The study's certificate `variant` of its Psi on x: (B, 1, n), param: (B,), flagged against the threshold of
    the ID inputs calib_x: (C, 1, n), calib_param: (C,) (scored first, with the same `generator`)."""
    dens = DensityModels(joint=models.joint, input=models.input)
    opts = dict(models.config.ode_options(), variant=variant, generator=generator)
    threshold = calibrate_threshold(certificate(dens, models.regressor, calib_x, calib_param, **opts).score)
    res = certificate(dens, models.regressor, x, param, **opts)
    return Certification(res.score, threshold, res.score < threshold, res.prediction[:, 0], variant)


def certify(
    models: StudyModels, inputs, *, variant: str = "x&y", generator: torch.Generator | None = None
) -> Certification:
    """Certify Psi's predictions on inputs: (B, n) (array or tensor, the study's grid) with the models of
    `fit_certificate` (or `load_study` of a run trained on arrays): scores, the threshold of the held-out ID inputs
    and OOD flags. `variant` as in `score.certificate` ("x&y", "x" or "y|x" with these models)."""
    if models.calib_inputs is None:
        raise ValueError("models: a built-in PDE's study; certify its families with `calibrated_certificate`")
    x = torch.as_tensor(check_fields(_numpy(inputs), "inputs"), device=models.calib_inputs.device)[:, None]
    if x.shape[2] != models.config.n:
        raise ValueError(f"inputs: expected grid size {models.config.n} (the study's), got {x.shape[2]}")
    calib = models.calib_inputs
    return calibrated_certificate(models, x, x.new_zeros(len(x)), calib, calib.new_zeros(len(calib)),
                                  variant=variant, generator=generator)  # fmt: skip
