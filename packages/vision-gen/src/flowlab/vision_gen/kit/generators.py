"""Image generators with their inversion: initial latents (B, *latent_shape) -> images (B, C, H, W) in [0, 1] with the
kit's DPM-Solver++(2M) (`kit.sampling.generate`), and images -> latents with its naive DDIM inversion
(`kit.sampling.invert_to_noise`), both on diffusers' trailing grid.

    gen = load_generator("digits-teacher", digits=DigitsDenoiserConfig(...), device="cpu")  # or a pipeline folder
    images = gen.generate(latents, steps=50)       # latents from a watermark's `embed`
    recovered = gen.invert(images, steps=50)       # read them with the watermark's `extract`

"digits-teacher" is the kit's epsilon digits UNet (`kit.train.digits_denoiser`, pixel space: the latents are the
images in [-1, 1]), trained into the artifact cache on first use. Any other name is a diffusers pipeline folder
(`kit.diffusers.load_pipeline`): a pixel-space UNet (DDPMPipeline, DDIMPipeline), or a latent one with its VAE
(images decoded from and encoded to `vae.config.scaling_factor`-scaled latents) and, with a text encoder, the
prompt's embeddings (no classifier-free guidance, so the inversion stays a plain DDIM inversion). The digits model is
built (or read from the cache) on first use of `field`, so shapes can be checked before any work.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from functools import cached_property

import torch
from torch import nn

from flowlab.vision_gen.kit.data import from_unit, to_unit
from flowlab.vision_gen.kit.diffusers import DiffusersDenoiser, load_pipeline
from flowlab.vision_gen.kit.sampling import batched, generate, invert_to_noise
from flowlab.vision_gen.kit.train import DigitsDenoiserConfig, digits_denoiser

__all__ = ["DIGITS_TEACHER", "ImageGenerator", "diffusers_generator", "digits_generator", "load_generator"]

#: the model name of the kit's digits denoiser (any other name is a diffusers pipeline folder)
DIGITS_TEACHER = "digits-teacher"


class ImageGenerator:
    """A core epsilon/data model (`field`, built by `build` on first use) with the maps between its sampling space
    and images: `decode` (B, *latent_shape) -> (B, *image_shape) in [0, 1] and `encode` back."""

    def __init__(
        self,
        build: Callable[[], nn.Module],
        *,
        latent_shape: tuple[int, ...],
        image_shape: tuple[int, int, int],
        decode: Callable[[torch.Tensor], torch.Tensor],
        encode: Callable[[torch.Tensor], torch.Tensor],
        device: torch.device | str = "cpu",
    ) -> None:
        self._build, self.decode, self.encode = build, decode, encode
        self.latent_shape, self.image_shape = tuple(latent_shape), tuple(image_shape)
        self.device = torch.device(device)

    @cached_property
    def field(self) -> nn.Module:
        """The model, built on first use (outside inference mode: a build may train)."""
        return self._build()

    def generate(self, latents: torch.Tensor, *, steps: int = 50, batch: int = 64) -> torch.Tensor:
        """Images (B, *image_shape) in [0, 1] (on the CPU) from initial latents (B, *latent_shape)."""
        _check(latents, self.latent_shape, "latents")
        field = self.field

        def run(z: torch.Tensor) -> torch.Tensor:
            with torch.inference_mode():
                return self.decode(generate(field, z.to(self.device), steps=steps)).cpu().float()

        return batched(run, latents.float(), batch)

    def invert(self, images: torch.Tensor, *, steps: int = 50, batch: int = 64) -> torch.Tensor:
        """The initial latents (B, *latent_shape) (on the CPU) that generate images (B, *image_shape) in [0, 1]."""
        _check(images, self.image_shape, "images")
        field = self.field

        def run(x: torch.Tensor) -> torch.Tensor:
            with torch.inference_mode():
                x = self.encode(x.to(self.device))
            return invert_to_noise(field, x, steps=steps).cpu().float()

        return batched(run, images.float(), batch)


def _check(x: torch.Tensor, shape: tuple[int, ...], name: str) -> None:
    if not isinstance(x, torch.Tensor) or tuple(x.shape[1:]) != shape or x.shape[0] < 1:
        got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"{name}: expected shape (B, {', '.join(map(str, shape))}), got {got}")
    if not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name}: contains NaN or inf")


def digits_generator(config: DigitsDenoiserConfig, *, device: torch.device | str = "cpu") -> ImageGenerator:
    """The kit's digits denoiser of `config` (1 x size x size, pixel space), trained into the cache on first use."""
    shape = (1, config.size, config.size)
    return ImageGenerator(
        lambda: digits_denoiser(config, device=device),
        latent_shape=shape,
        image_shape=shape,
        decode=to_unit,
        encode=from_unit,
        device=device,
    )


def diffusers_generator(
    folder: str | os.PathLike[str], *, prompt: str = "", device: torch.device | str = "cpu"
) -> ImageGenerator:
    """The diffusers pipeline saved in `folder`: its UNet and scheduler (epsilon or sample prediction), its VAE if it
    has one (`AutoencoderKL`'s interface), and `prompt`'s embeddings if it has a text encoder."""
    pipe = load_pipeline(folder).to(device)
    unet, vae = pipe.unet, getattr(pipe, "vae", None)
    size = unet.config.sample_size
    size = (size, size) if isinstance(size, int) else tuple(size)
    latent_shape = (unet.config.in_channels, *size)
    if getattr(unet.config, "cross_attention_dim", None) and getattr(pipe, "text_encoder", None) is None:
        raise ValueError(f"{folder}: the UNet takes text embeddings, but the pipeline has no text encoder")

    embeds = None
    if getattr(pipe, "text_encoder", None) is not None:
        with torch.inference_mode():
            embeds = pipe.encode_prompt(prompt, torch.device(device), 1, False)[0]
    try:
        field = DiffusersDenoiser(unet, pipe.scheduler, prompt_embeds=embeds)
    except ValueError as err:
        raise ValueError(f"{folder}: {err}") from err

    if vae is None:
        return ImageGenerator(lambda: field, latent_shape=latent_shape, image_shape=latent_shape, decode=to_unit,
                              encode=from_unit, device=device)  # fmt: skip
    factor = 2 ** (len(vae.config.block_out_channels) - 1)
    scale = vae.config.scaling_factor
    image_shape = (vae.config.out_channels, *(s * factor for s in size))
    if not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"{folder}: the VAE's scaling_factor {scale} is not a positive number")
    return ImageGenerator(
        lambda: field,
        latent_shape=latent_shape,
        image_shape=image_shape,
        decode=lambda z: to_unit(vae.decode(z / scale).sample),
        encode=lambda x: vae.encode(from_unit(x)).latent_dist.mean * scale,
        device=device,
    )


def load_generator(
    model: str | os.PathLike[str],
    *,
    digits: DigitsDenoiserConfig,
    prompt: str = "",
    device: torch.device | str = "cpu",
) -> ImageGenerator:
    """`digits_generator(digits)` for "digits-teacher", else `diffusers_generator(model, prompt=)`."""
    if str(model) == DIGITS_TEACHER:
        return digits_generator(digits, device=device)
    return diffusers_generator(model, prompt=prompt, device=device)
