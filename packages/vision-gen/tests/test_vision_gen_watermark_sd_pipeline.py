"""A tiny `StableDiffusionPipeline` built from configs with random weights (conftest's `tiny_sd_pipeline`): loaded
back offline, fed Spherical-watermark latents through `latents=`, and the watermark read back. No download
anywhere."""

from __future__ import annotations

import torch

from flowlab.vision_gen.kit.diffusers import DiffusersDenoiser, invert_with_diffusers
from flowlab.vision_gen.kit.generators import diffusers_generator
from flowlab.vision_gen.kit.sampling import generate, invert_to_noise
from flowlab.vision_gen.watermark import SphericalConfig, SphericalWatermark, embed_with_key, read_with_key


def test_stable_diffusion_pipeline_embed_generate_invert_extract(tiny_sd_pipeline):
    from diffusers import StableDiffusionPipeline

    pipe = StableDiffusionPipeline.from_pretrained(tiny_sd_pipeline, local_files_only=True, safety_checker=None)
    pipe.set_progress_bar_config(disable=True)
    wm = SphericalWatermark.from_seed(SphericalConfig.for_latent((4, 8, 8), 16, 7, block_size=16), 0)
    m = torch.randint(0, 2, (2, 16), generator=torch.Generator().manual_seed(1))
    z_t = wm.embed(m, generator=torch.Generator().manual_seed(2))
    prompt = ["a cat", "a cat"]
    with torch.no_grad():
        lat = pipe(prompt=prompt, latents=z_t, num_inference_steps=4, guidance_scale=1.0, output_type="latent").images
        embeds = pipe.encode_prompt("a cat", "cpu", 1, False)[0]
    # the pipeline's DDIM trajectory is FlowLab's DDIM on the same UNet and prompt embeddings
    field = DiffusersDenoiser(pipe.unet, pipe.scheduler, prompt_embeds=embeds)
    torch.testing.assert_close(generate(field, z_t, steps=4, method="ddim"), lat, atol=1e-4, rtol=1e-4)
    # exact inversion of the generated latents returns the watermarked noise, hence the message
    z_hat = invert_to_noise(field, lat, steps=4, exact=True)
    assert torch.equal(wm.extract(z_hat).bits, m)
    # and the whole image path: decode, re-encode, invert with diffusers' DDIMInverseScheduler, extract
    with torch.no_grad():
        img = pipe(prompt=prompt, latents=z_t, num_inference_steps=4, guidance_scale=1.0, output_type="pt").images
        back = pipe.vae.encode(2 * img - 1).latent_dist.mean * pipe.vae.config.scaling_factor
    assert img.shape == (2, 3, 16, 16) and back.shape == lat.shape
    inv = invert_with_diffusers(
        pipe.unet, pipe.scheduler.config, back, steps=4, encoder_hidden_states=embeds.expand(2, -1, -1)
    )
    res = wm.extract(inv)
    assert res.bits.shape == m.shape and 0.0 <= float(res.bit_accuracy(m).mean()) <= 1.0


def test_readme_way_our_latents_in_the_pipeline_and_our_inversion(tiny_sd_pipeline):
    """The watermark README's Python: a key's latents as the pipeline's `latents=`, its images inverted by
    `diffusers_generator` on the same folder; our generation from those latents is the pipeline's VAE decoding."""
    from diffusers import StableDiffusionPipeline

    pipe = StableDiffusionPipeline.from_pretrained(tiny_sd_pipeline, local_files_only=True, safety_checker=None)
    pipe.set_progress_bar_config(disable=True)
    wm = SphericalWatermark.from_seed(SphericalConfig.for_latent((4, 8, 8), 16, 7, block_size=16), 0)
    marked = embed_with_key(wm, 2, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        images = pipe(["a cat"] * 2, latents=marked.latents, num_inference_steps=4, guidance_scale=1.0,
                      output_type="pt").images  # fmt: skip
    gen = diffusers_generator(tiny_sd_pipeline, prompt="a cat")
    assert (gen.latent_shape, gen.image_shape) == ((4, 8, 8), (3, 16, 16)) and images.shape == (2, 3, 16, 16)
    recovered = gen.invert(images, steps=4)
    assert recovered.shape == (2, 4, 8, 8) and bool(torch.isfinite(recovered).all())
    report = read_with_key(wm, recovered, marked.messages)
    assert len(report["detected"]) == 2 and report["threshold"] == 14
    # the pipeline's DDIM and ours differ only in the sampler: with DDIM on both, the images agree
    embeds = pipe.encode_prompt("a cat", "cpu", 1, False)[0]
    with torch.no_grad():
        ours = gen.decode(generate(DiffusersDenoiser(pipe.unet, pipe.scheduler, prompt_embeds=embeds),
                                   marked.latents, steps=4, method="ddim"))  # fmt: skip
    torch.testing.assert_close(ours, images, atol=1e-4, rtol=1e-4)
