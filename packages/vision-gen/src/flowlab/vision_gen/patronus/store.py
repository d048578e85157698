"""A trained model on disk: `model.safetensors` (its weights), `prior.safetensors` (the activation prior's, when
trained) and `config.json` (format, version, the model, training and prior configs), loaded without pickles."""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from flowlab.vision_gen.patronus.model import ModelConfig, PatronusModel, patronus_model
from flowlab.vision_gen.patronus.prior import ActivationPrior, PriorConfig
from flowlab.vision_gen.patronus.train import TrainConfig

__all__ = ["load_model", "save_model"]

FORMAT, VERSION = "flowlab.vision_gen.patronus", 1


def _save(module: torch.nn.Module, path: Path) -> None:
    save_file({k: v.detach().cpu().contiguous() for k, v in module.state_dict().items()}, path)


def save_model(
    folder: str | os.PathLike[str], model: PatronusModel, config: TrainConfig, prior: ActivationPrior | None = None
) -> None:
    """Write `model` (trained by `config`) and its activation prior into `folder` (created)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    _save(model, folder / "model.safetensors")
    meta = {"format": FORMAT, "version": VERSION, "model": model.config.to_dict(), "train": config.to_dict(),
            "prior": None if prior is None else prior.config.to_dict()}  # fmt: skip
    if prior is not None:
        _save(prior, folder / "prior.safetensors")
    (folder / "config.json").write_text(json.dumps(meta, indent=2))


def _load(module: torch.nn.Module, path: Path, name: str) -> None:
    try:
        state = load_file(path)
        module.load_state_dict(state)
    except Exception as err:  # safetensors' own errors and shape mismatches
        raise ValueError(f"{name}: {path} does not hold this model's weights ({type(err).__name__})") from err
    if not all(bool(torch.isfinite(v).all()) for v in state.values() if v.is_floating_point()):
        raise ValueError(f"{name}: {path} holds NaN or infinite weights")


def load_model(
    folder: str | os.PathLike[str], *, device: torch.device | str = "cpu", name: str = "checkpoint"
) -> tuple[PatronusModel, TrainConfig, ActivationPrior | None]:
    """The model saved in `folder` (eval mode, on `device`), its training config and its prior (None when none was
    trained); a folder that is not one is a ValueError naming `name`."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"{name}: {folder} is not a folder written by `flowlab vision patronus train`")
    for file in ("config.json", "model.safetensors"):
        if not (folder / file).is_file():
            raise ValueError(f"{name}: {folder} is not a saved Patronus model (no {file})")
    try:
        meta = json.loads((folder / "config.json").read_text())
        if not isinstance(meta, dict) or meta.get("format") != FORMAT or meta.get("version") != VERSION:
            raise ValueError(f"expected format {FORMAT!r} version {VERSION}")
        model_config = ModelConfig.from_mapping(meta["model"])
        config = TrainConfig.from_mapping(meta["train"])
        prior_config = None if meta["prior"] is None else PriorConfig.from_mapping(meta["prior"])
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError) as err:
        raise ValueError(f"{name}: {folder / 'config.json'} is not a Patronus model config ({err})") from err
    model = patronus_model(model_config)
    _load(model, folder / "model.safetensors", name)
    prior = None
    if prior_config is not None:
        if not (folder / "prior.safetensors").is_file():
            raise ValueError(f"{name}: {folder} is not a saved Patronus model (no prior.safetensors)")
        prior = ActivationPrior(model_config.num_prototypes, prior_config)
        _load(prior, folder / "prior.safetensors", name)
        prior = prior.to(device).eval()
    return model.to(device).eval(), config, prior
