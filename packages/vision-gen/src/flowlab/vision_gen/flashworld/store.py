"""A dual-mode model on disk: `model.safetensors` and a `config.json` (format "flowlab.flashworld", version 1) holding
the model's config and how it was trained (pre-trained, or distilled in a mode with its settings)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

from flowlab.vision_gen.flashworld.model import DualModeConfig, DualModeModel
from flowlab.vision_gen.kit.store import load_weights, read_config, save_weights

__all__ = ["load_model", "save_model"]

FORMAT, VERSION = "flowlab.flashworld", 1


def save_model(folder: str | os.PathLike[str], model: DualModeModel, **meta: Any) -> None:
    """Write `model` into `folder` (created) with `meta` (JSON-ready: the training settings) in its config."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    save_weights(model, folder / "model.safetensors")
    config = {"format": FORMAT, "version": VERSION, "model": model.config.to_dict(), **meta}
    (folder / "config.json").write_text(json.dumps(config, indent=1))


def load_model(
    folder: str | os.PathLike[str], *, device: torch.device | str = "cpu", name: str = "folder"
) -> tuple[DualModeModel, dict[str, Any]]:
    """(the model in eval mode on `device`, its config.json) of a folder written by `save_model`; a ValueError
    naming `name` when the folder, its config or its weights are not such a model's."""
    meta = read_config(folder, format=FORMAT, version=VERSION, files=("model.safetensors",), what="dual-mode model",
                       command="flowlab vision scene3d pretrain", name=name)  # fmt: skip
    try:
        config = DualModeConfig.from_mapping(meta["model"])
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"{name}: {Path(folder) / 'config.json'} holds no valid model config ({err})") from err
    model = DualModeModel(config)
    load_weights(model, Path(folder) / "model.safetensors", name)
    return model.to(device).eval(), meta
