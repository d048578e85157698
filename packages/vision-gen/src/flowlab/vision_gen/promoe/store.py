"""A trained variant on disk: `model.safetensors` (its weights) and `config.json` (format, version, the model and
training configs), loaded without pickles."""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from flowlab.core.nets.dit import DiT
from flowlab.vision_gen.promoe.model import ModelConfig, promoe_dit
from flowlab.vision_gen.promoe.train import TrainConfig

__all__ = ["load_model", "save_model"]

FORMAT, VERSION = "flowlab.vision_gen.promoe", 1


def save_model(folder: str | os.PathLike[str], model: DiT, model_config: ModelConfig, config: TrainConfig) -> None:
    """Write `model` (a DiT of `model_config`, trained by `config`) into `folder` (created)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}, folder / "model.safetensors")
    meta = {"format": FORMAT, "version": VERSION, "model": model_config.to_dict(), "train": config.to_dict()}
    (folder / "config.json").write_text(json.dumps(meta, indent=2))


def load_model(
    folder: str | os.PathLike[str], *, device: torch.device | str = "cpu", name: str = "checkpoint"
) -> tuple[DiT, ModelConfig, TrainConfig]:
    """The model saved in `folder` (eval mode, on `device`), its model config and training config; a folder that is
    not one is a ValueError naming `name`."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"{name}: {folder} is not a folder written by `flowlab vision promoe train`")
    for file in ("config.json", "model.safetensors"):
        if not (folder / file).is_file():
            raise ValueError(f"{name}: {folder} is not a saved ProMoE model (no {file})")
    try:
        meta = json.loads((folder / "config.json").read_text())
        if not isinstance(meta, dict) or meta.get("format") != FORMAT or meta.get("version") != VERSION:
            raise ValueError(f"expected format {FORMAT!r} version {VERSION}")
        model_config = ModelConfig.from_mapping(meta["model"])
        config = TrainConfig.from_mapping(meta["train"])
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError) as err:
        raise ValueError(f"{name}: {folder / 'config.json'} is not a ProMoE model config ({err})") from err
    model = promoe_dit(model_config)
    try:
        state = load_file(folder / "model.safetensors")
        model.load_state_dict(state)
    except Exception as err:  # safetensors' own errors and shape mismatches
        raise ValueError(
            f"{name}: {folder / 'model.safetensors'} does not hold this model's weights ({type(err).__name__})"
        ) from err
    if not all(bool(torch.isfinite(v).all()) for v in state.values() if v.is_floating_point()):
        raise ValueError(f"{name}: {folder / 'model.safetensors'} holds NaN or infinite weights")
    return model.to(device).eval(), model_config, config
