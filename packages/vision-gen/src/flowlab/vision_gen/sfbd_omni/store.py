"""A trained posterior on disk: `posterior.safetensors` (its weights) and `config.json` (the SFBD-OMNI config, the
corruption by name and parameters, and the image shape), so it loads and restores new observations on its own."""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from flowlab.vision_gen.kit.corruptions import Corruption, make_corruption
from flowlab.vision_gen.sfbd_omni.model import BridgePosterior, SFBDConfig

__all__ = ["load_posterior", "save_posterior"]


def save_posterior(
    folder: str | os.PathLike[str], model: BridgePosterior, config: SFBDConfig, corruption: tuple[str, dict]
) -> None:
    """Write `model` trained with `config` for the corruption (name, parameters) of `make_corruption` to `folder`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()},
              folder / "posterior.safetensors")  # fmt: skip
    name, params = corruption
    meta = {"sfbd_omni": config.to_dict(), "corruption": {"name": name, "params": params},
            "image_shape": list(model.image_shape)}  # fmt: skip
    (folder / "config.json").write_text(json.dumps(meta, indent=2))


def load_posterior(
    folder: str | os.PathLike[str], *, device: torch.device | str = "cpu"
) -> tuple[BridgePosterior, SFBDConfig, Corruption]:
    """The posterior saved in `folder` (eval mode, no grad, on `device`), its config and its corruption."""
    folder = Path(folder)
    for name in ("config.json", "posterior.safetensors"):
        if not (folder / name).is_file():
            raise ValueError(f"model: {folder} is not a saved SFBD-OMNI posterior (no {name})")
    try:
        meta = json.loads((folder / "config.json").read_text())
        config = SFBDConfig.from_mapping(meta["sfbd_omni"])
        corruption = make_corruption(meta["corruption"]["name"], **meta["corruption"]["params"])
        shape = tuple(int(s) for s in meta["image_shape"])
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
        raise ValueError(f"model: {folder / 'config.json'} is not an SFBD-OMNI config ({err})") from err
    model = BridgePosterior(shape, corruption.observation_channels(shape[0]), hidden=config.hidden, seed=config.seed)
    try:
        model.load_state_dict(load_file(folder / "posterior.safetensors"))
    except Exception as err:  # safetensors' own errors and shape mismatches
        raise ValueError(f"model: {folder / 'posterior.safetensors'} does not hold this posterior's weights") from err
    return model.to(device).eval().requires_grad_(False), config, corruption
