"""diffusers interoperability: a diffusers UNet (+ its scheduler config, prompt embeddings, CFG scale) as a core
model, so `sample_diffusion` / `invert` and the watermarks run on it; latents written by a FlowLab watermark are
accepted by any diffusers pipeline through `latents=`; diffusers' `DDIMInverseScheduler` is an alternative inversion.

A whole `StableDiffusionPipeline` (CLIP text encoder from `transformers`) works the same way: pass the watermarked
latents as `latents=`, and build the core model from `pipe.unet`, `pipe.scheduler` and `pipe.encode_prompt(...)`
(tested on a tiny pipeline built from configs, saved and loaded back offline). `load_pipeline` opens a saved
pipeline folder offline and safely (safetensors only); `kit.generators` turns one into an image generator with its
inversion.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from torch import nn

from flowlab.core.schedules import DiscreteVP
from flowlab.core.typing import Prediction

__all__ = ["DiffusersDenoiser", "invert_with_diffusers", "load_pipeline"]

_PREDICTIONS = {"epsilon": Prediction.EPSILON, "sample": Prediction.DATA}


class DiffusersDenoiser(nn.Module):
    """forward(x=(B,C,H,W), t=(B,) core time) -> the UNet output (epsilon or sample prediction, read from the
    scheduler config; v-prediction raises). prompt_embeds: (B or 1, L, D) for conditional UNets; guidance_scale > 1
    uses `negative_embeds` (the empty prompt) for classifier-free guidance."""

    def __init__(
        self,
        unet: nn.Module,
        scheduler,
        *,
        prompt_embeds: torch.Tensor | None = None,
        negative_embeds: torch.Tensor | None = None,
        guidance_scale: float = 1.0,
    ) -> None:
        super().__init__()
        kind = scheduler.config.prediction_type
        if kind not in _PREDICTIONS:
            raise ValueError(f"scheduler: prediction_type {kind!r} is not supported (epsilon or sample)")
        if guidance_scale != 1.0 and negative_embeds is None:
            raise ValueError("negative_embeds: needed for guidance_scale != 1")
        self.unet, self.schedule, self.prediction = unet, DiscreteVP.from_diffusers(scheduler), _PREDICTIONS[kind]
        self.prompt_embeds, self.negative_embeds, self.guidance_scale = prompt_embeds, negative_embeds, guidance_scale

    def _call(self, x: torch.Tensor, k: torch.Tensor, embeds: torch.Tensor | None) -> torch.Tensor:
        if embeds is None:
            return self.unet(x, k).sample
        return self.unet(x, k, encoder_hidden_states=embeds.expand(x.shape[0], -1, -1)).sample

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """x: (B, C, H, W), t: (B,) core time -> the UNet output with the prompt embeddings, classifier-free guided when
        `guidance_scale` != 1."""
        k = self.schedule.timestep_of(t.to(torch.float64)).to(x.dtype)
        out = self._call(x, k, self.prompt_embeds)
        if self.guidance_scale != 1.0:
            unc = self._call(x, k, self.negative_embeds)
            out = unc + self.guidance_scale * (out - unc)
        return out


@torch.no_grad()
def invert_with_diffusers(
    unet: nn.Module,
    scheduler_config: dict,
    latents: torch.Tensor,
    *,
    steps: int = 50,
    encoder_hidden_states: torch.Tensor | None = None,
) -> torch.Tensor:
    """DDIM inversion with diffusers' `DDIMInverseScheduler` (no guidance): latents (B, C, H, W) -> x_T."""
    from diffusers import DDIMInverseScheduler

    inv = DDIMInverseScheduler.from_config(scheduler_config)
    inv.set_timesteps(steps)
    x = latents
    for k in inv.timesteps:
        kw = {} if encoder_hidden_states is None else {"encoder_hidden_states": encoder_hidden_states}
        x = inv.step(unet(x, k, **kw).sample, k, x).prev_sample
    return x


def load_pipeline(folder: str | os.PathLike[str]):
    """The diffusers pipeline saved in `folder` (`save_pretrained`), loaded offline from safetensors files only (a
    pickled weight file is refused, never run); it must hold a `unet` and a `scheduler`. FileNotFoundError or
    ValueError naming the folder."""
    from diffusers import DiffusionPipeline
    from diffusers.utils import logging

    folder = Path(folder)
    if not (folder / "model_index.json").is_file():
        raise FileNotFoundError(f"{folder}: no model_index.json (not a diffusers pipeline folder)")
    bar = logging.is_progress_bar_enabled()
    logging.disable_progress_bar()
    try:
        pipe = DiffusionPipeline.from_pretrained(
            folder, local_files_only=True, use_safetensors=True, low_cpu_mem_usage=False
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RuntimeError) as err:
        lines = [line.strip() for line in str(err).splitlines() if line.strip()]  # state-dict errors: one per tensor
        detail = f"no {err} entry" if isinstance(err, KeyError) else " ".join(lines[:2])
        raise ValueError(f"{folder}: cannot be loaded as a diffusers pipeline ({detail})") from err
    finally:
        if bar:
            logging.enable_progress_bar()
    if getattr(pipe, "unet", None) is None or getattr(pipe, "scheduler", None) is None:
        raise ValueError(f"{folder}: a {type(pipe).__name__} without a unet and a scheduler")
    pipe.set_progress_bar_config(disable=True)
    return pipe
