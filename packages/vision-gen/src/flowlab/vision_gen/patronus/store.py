"""A trained model on disk: `model.safetensors` (its weights), `prior.safetensors` (the activation prior's, when
trained) and `config.json` (format, version, the model, training and prior configs), loaded without pickles."""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from flowlab.vision_gen.kit.store import load_weights, read_config, save_weights
from flowlab.vision_gen.patronus.model import ModelConfig, PatronusModel, patronus_model
from flowlab.vision_gen.patronus.prior import ActivationPrior, PriorConfig
from flowlab.vision_gen.patronus.train import TrainConfig

__all__ = ["load_model", "save_model"]

FORMAT, VERSION = "flowlab.vision_gen.patronus", 1


def save_model(
    folder: str | os.PathLike[str], model: PatronusModel, config: TrainConfig, prior: ActivationPrior | None = None
) -> None:
    """Write `model` (trained by `config`) and its activation prior into `folder` (created)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    save_weights(model, folder / "model.safetensors")
    meta = {"format": FORMAT, "version": VERSION, "model": model.config.to_dict(), "train": config.to_dict(),
            "prior": None if prior is None else prior.config.to_dict()}  # fmt: skip
    if prior is not None:
        save_weights(prior, folder / "prior.safetensors")
    (folder / "config.json").write_text(json.dumps(meta, indent=2))


def load_model(
    folder: str | os.PathLike[str], *, device: torch.device | str = "cpu", name: str = "checkpoint"
) -> tuple[PatronusModel, TrainConfig, ActivationPrior | None]:
    """The model saved in `folder` (eval mode, on `device`), its training config and its prior (None when none was
    trained); a folder that is not one is a ValueError naming `name`."""
    folder = Path(folder)
    meta = read_config(folder, format=FORMAT, version=VERSION, files=("model.safetensors",), what="Patronus model",
                       command="flowlab vision patronus train", name=name)  # fmt: skip
    try:
        model_config = ModelConfig.from_mapping(meta["model"])
        config = TrainConfig.from_mapping(meta["train"])
        prior_config = None if meta["prior"] is None else PriorConfig.from_mapping(meta["prior"])
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"{name}: {folder / 'config.json'} is not a Patronus model config ({err})") from err
    model = patronus_model(model_config)
    load_weights(model, folder / "model.safetensors", name)
    prior = None
    if prior_config is not None:
        if not (folder / "prior.safetensors").is_file():
            raise ValueError(f"{name}: {folder} is not a saved Patronus model (no prior.safetensors)")
        prior = ActivationPrior(model_config.num_prototypes, prior_config)
        load_weights(prior, folder / "prior.safetensors", name)
        prior = prior.to(device).eval()
    return model.to(device).eval(), config, prior
