"""A trained posterior on disk: `posterior.safetensors` (its weights) and `config.json` (the SFBD-OMNI config, the
corruption by name and parameters, and the image shape), so it loads and restores new observations on its own."""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from flowlab.vision_gen.kit.corruptions import Corruption, make_corruption
from flowlab.vision_gen.kit.store import load_weights, read_config, save_weights
from flowlab.vision_gen.sfbd_omni.model import BridgePosterior, SFBDConfig

__all__ = ["load_posterior", "save_posterior"]

FORMAT, VERSION = "flowlab.vision_gen.sfbd_omni", 1


def save_posterior(
    folder: str | os.PathLike[str], model: BridgePosterior, config: SFBDConfig, corruption: tuple[str, dict]
) -> None:
    """Write `model` trained with `config` for the corruption (name, parameters) of `make_corruption` to `folder`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    save_weights(model, folder / "posterior.safetensors")
    name, params = corruption
    meta = {"format": FORMAT, "version": VERSION, "sfbd_omni": config.to_dict(),
            "corruption": {"name": name, "params": params}, "image_shape": list(model.image_shape)}  # fmt: skip
    (folder / "config.json").write_text(json.dumps(meta, indent=2))


def load_posterior(
    folder: str | os.PathLike[str], *, device: torch.device | str = "cpu"
) -> tuple[BridgePosterior, SFBDConfig, Corruption]:
    """The posterior saved in `folder` (eval mode, no grad, on `device`), its config and its corruption."""
    folder = Path(folder)
    meta = read_config(folder, format=FORMAT, version=VERSION, files=("posterior.safetensors",),
                       what="SFBD-OMNI posterior", command="flowlab vision sfbd run", name="model")  # fmt: skip
    try:
        config = SFBDConfig.from_mapping(meta["sfbd_omni"])
        corruption = make_corruption(meta["corruption"]["name"], **meta["corruption"]["params"])
        shape = tuple(int(s) for s in meta["image_shape"])
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"model: {folder / 'config.json'} is not an SFBD-OMNI config ({err})") from err
    model = BridgePosterior(shape, corruption.observation_channels(shape[0]), hidden=config.hidden, seed=config.seed)
    load_weights(model, folder / "posterior.safetensors", "model")
    return model.to(device).eval().requires_grad_(False), config, corruption
