"""Trained GenDR-Pix models on disk: one folder holding `config.json` (the GenDR-Pix config and the models present)
and `<name>.safetensors` per model (its net's weights: "teacher", "stage1", "stage2"). The teacher and stage I read
the kit's autoencoder of the config from the artifact cache; stage II, the student, needs nothing else."""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
from torch import nn

from flowlab.vision_gen.gendr_pix.model import GenDRConfig, LatentTeacher, PixelSR, SRNet, StageOne
from flowlab.vision_gen.kit.store import load_weights, read_config, save_weights

__all__ = ["MODEL_NAMES", "load_sr", "save_sr", "saved_models"]

MODEL_NAMES = ("teacher", "stage1", "stage2")
FORMAT, VERSION = "flowlab.vision_gen.gendr_pix", 1


def save_sr(folder: str | os.PathLike[str], models: dict[str, nn.Module], config: GenDRConfig) -> Path:
    """Write `models` ({name in MODEL_NAMES: LatentTeacher / StageOne / PixelSR}) trained with `config` to `folder`
    (created), beside any models already there of the same config."""
    folder = Path(folder)
    unknown = sorted(set(models) - set(MODEL_NAMES))
    if unknown:
        raise ValueError(f"models: expected names among {MODEL_NAMES}, got {unknown}")
    folder.mkdir(parents=True, exist_ok=True)
    present = set(models)
    if (folder / "config.json").is_file():
        meta = _meta(folder)
        if meta["gendr_pix"] != config.to_dict():
            raise ValueError(f"folder: {folder} holds models of another config; choose an empty folder")
        present |= set(meta["models"])
    for name, model in models.items():
        save_weights(model.net, folder / f"{name}.safetensors")
    meta = {
        "format": FORMAT,
        "version": VERSION,
        "gendr_pix": config.to_dict(),
        "models": sorted(present, key=MODEL_NAMES.index),
    }
    (folder / "config.json").write_text(json.dumps(meta, indent=2))
    return folder


def _meta(folder: Path) -> dict:
    meta = read_config(folder, format=FORMAT, version=VERSION, files=(), what="GenDR-Pix model folder",
                       command="flowlab vision sr train-teacher", name="model")  # fmt: skip
    try:
        GenDRConfig.from_mapping(meta["gendr_pix"])
        if not set(meta["models"]) <= set(MODEL_NAMES):
            raise ValueError(f"unknown models {meta['models']}")
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"model: {folder / 'config.json'} is not a GenDR-Pix config ({err})") from err
    return meta


def saved_models(folder: str | os.PathLike[str]) -> list[str]:
    """The names of the models saved in `folder` (a ValueError naming `model` when it is not a GenDR-Pix folder)."""
    folder = Path(folder)
    if not (folder / "config.json").is_file():
        raise ValueError(f"model: {folder} is not a GenDR-Pix model folder (no config.json)")
    return list(_meta(folder)["models"])


def _weights(folder: Path, name: str, net: SRNet) -> SRNet:
    load_weights(net, folder / f"{name}.safetensors", "model")
    return net


def load_sr(
    folder: str | os.PathLike[str], name: str = "stage2", *, device: torch.device | str = "cpu"
) -> tuple[nn.Module, GenDRConfig]:
    """Model `name` of `folder` (eval mode, no grad, on `device`) and its config."""
    from flowlab.vision_gen.kit.autoencoder import tiny_autoencoder

    folder = Path(folder)
    names = saved_models(folder)
    if name not in names:
        raise ValueError(f"model: {folder} holds {names}, not {name!r}")
    config = GenDRConfig.from_mapping(_meta(folder)["gendr_pix"])
    r, w, b = config.factor, config.width, config.blocks
    latent = config.autoencoder.latent_channels
    if name == "stage2":
        model: nn.Module = PixelSR(_weights(folder, name, SRNet(3 * r * r, 3 * r * r, w, b)), r)
    else:
        teacher = LatentTeacher(tiny_autoencoder(config.autoencoder), SRNet(latent, latent, w, b))
        if name == "teacher":
            model = LatentTeacher(teacher.autoencoder, _weights(folder, name, teacher.net))
        else:
            model = StageOne(teacher, _weights(folder, name, SRNet(3 * r * r, latent, w, b)))
    return model.to(device).eval().requires_grad_(False), config
