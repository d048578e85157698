"""MOLM folders and key files, safetensors + JSON (no pickle).

A trained model folder: config.json (format tag, the MolmConfig, the TrainConfig and the kit autoencoder's
AutoencoderConfig whose frozen decoder carries the markers), markers.safetensors (every adapter's down / up
weights), extractor.safetensors. A key is a watermark-family key folder (`watermark.base`): method "molm",
config {"key_bits": M}, tensor "key" (M,) of 0/1. Loading checks each and raises ValueError naming what is wrong.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from flowlab.vision_gen.kit.autoencoder import AutoencoderConfig, tiny_autoencoder
from flowlab.vision_gen.kit.store import load_weights, read_config, save_weights
from flowlab.vision_gen.watermark.base import check_key_tensor, read_key_folder, write_key_folder
from flowlab.vision_gen.watermark.molm.model import MolmConfig, MolmModel
from flowlab.vision_gen.watermark.molm.train import TrainConfig

__all__ = ["FORMAT", "load_molm", "load_molm_key", "save_molm", "save_molm_key"]

FORMAT, VERSION = "flowlab.molm", 1


def save_molm(folder: str | os.PathLike[str], model: MolmModel, train: TrainConfig, ae: AutoencoderConfig) -> Path:
    """Write a trained model into `folder` (created) -> the folder."""
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    meta = {"format": FORMAT, "version": VERSION, "model": model.config.to_dict(), "train": train.to_dict(),
            "autoencoder": ae.to_dict()}  # fmt: skip
    (folder / "config.json").write_text(json.dumps(meta, indent=2))
    save_file({k: v.contiguous().cpu() for k, v in model.markers.adapter_state().items()},
              str(folder / "markers.safetensors"))  # fmt: skip
    save_weights(model.extractor, folder / "extractor.safetensors")
    return folder


def _markers(path: Path) -> dict[str, torch.Tensor]:
    """The adapter tensors of a markers file (the markers load by name, `Markers.load_adapter_state`)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        return load_file(str(path))
    except (SafetensorError, OSError, RuntimeError) as err:
        raise ValueError(f"model: {path} is corrupted ({err})") from err


def load_molm(
    folder: str | os.PathLike[str], *, device: torch.device | str = "cpu"
) -> tuple[MolmModel, TrainConfig, AutoencoderConfig]:
    """(model in eval mode, its TrainConfig, the AutoencoderConfig of its decoder) from a `save_molm` folder; the
    autoencoder comes from the artifact cache (built on first use)."""
    folder = Path(folder)
    meta = read_config(folder, format=FORMAT, version=VERSION, files=("markers.safetensors", "extractor.safetensors"),
                       what="MOLM model", command="flowlab watermark molm train", name="model")  # fmt: skip
    try:
        config = MolmConfig.from_mapping(meta["model"])
        train = TrainConfig.from_mapping(meta["train"])
        ae_config = AutoencoderConfig.from_mapping(meta["autoencoder"])
    except (KeyError, TypeError) as err:
        raise ValueError(f"model: {folder / 'config.json'} lacks a valid 'model', 'train' or 'autoencoder'") from err
    model = MolmModel(tiny_autoencoder(ae_config, device="cpu").decoder, config)
    model.markers.load_adapter_state(_markers(folder / "markers.safetensors"))
    load_weights(model.extractor, folder / "extractor.safetensors", "model")
    return model.to(device).eval(), train, ae_config


def save_molm_key(path: str | os.PathLike[str], key: torch.Tensor) -> Path:
    """Write key bits (M,) as a watermark key folder (method "molm")."""
    if not isinstance(key, torch.Tensor) or key.dim() != 1 or not bool(((key == 0) | (key == 1)).all()):
        raise ValueError("key: expected a (M,) tensor of bits")
    return write_key_folder(path, "molm", {"key_bits": int(key.numel())}, {"key": key.to(torch.uint8)})


def load_molm_key(path: str | os.PathLike[str], key_bits: int) -> torch.Tensor:
    """The (key_bits,) long bits of a MOLM key folder; ValueError on another method, a wrong shape or non-bits."""
    method, config, tensors = read_key_folder(path)
    if method != "molm":
        raise ValueError(f"key: {path} is a {method!r} key, expected a 'molm' key")
    if config.get("key_bits") != key_bits:
        raise ValueError(f"key: {path} holds {config.get('key_bits')!r}-bit keys, the model reads {key_bits} bits")
    key = check_key_tensor(tensors, "key", (key_bits,))
    if not bool(((key == 0) | (key == 1)).all()):
        raise ValueError(f"key: {path} holds values other than 0 and 1")
    return key.long()
