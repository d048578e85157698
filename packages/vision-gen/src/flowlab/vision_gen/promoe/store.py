"""A trained variant on disk: `model.safetensors` (its weights) and `config.json` (format, version, the model and
training configs), loaded without pickles."""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from flowlab.core.nets.dit import DiT
from flowlab.vision_gen.kit.store import load_weights, read_config, save_weights
from flowlab.vision_gen.promoe.model import ModelConfig, promoe_dit
from flowlab.vision_gen.promoe.train import TrainConfig

__all__ = ["load_model", "save_model"]

FORMAT, VERSION = "flowlab.vision_gen.promoe", 1


def save_model(folder: str | os.PathLike[str], model: DiT, model_config: ModelConfig, config: TrainConfig) -> None:
    """Write `model` (a DiT of `model_config`, trained by `config`) into `folder` (created)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    save_weights(model, folder / "model.safetensors")
    meta = {"format": FORMAT, "version": VERSION, "model": model_config.to_dict(), "train": config.to_dict()}
    (folder / "config.json").write_text(json.dumps(meta, indent=2))


def load_model(
    folder: str | os.PathLike[str], *, device: torch.device | str = "cpu", name: str = "checkpoint"
) -> tuple[DiT, ModelConfig, TrainConfig]:
    """The model saved in `folder` (eval mode, on `device`), its model config and training config; a folder that is
    not one is a ValueError naming `name`."""
    folder = Path(folder)
    meta = read_config(folder, format=FORMAT, version=VERSION, files=("model.safetensors",), what="ProMoE model",
                       command="flowlab vision promoe train", name=name)  # fmt: skip
    try:
        model_config = ModelConfig.from_mapping(meta["model"])
        config = TrainConfig.from_mapping(meta["train"])
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"{name}: {folder / 'config.json'} is not a ProMoE model config ({err})") from err
    model = promoe_dit(model_config)
    load_weights(model, folder / "model.safetensors", name)
    return model.to(device).eval(), model_config, config
