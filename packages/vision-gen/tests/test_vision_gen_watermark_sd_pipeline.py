"""A tiny `StableDiffusionPipeline` built from configs with random weights (CLIP text encoder, a tokenizer over a
26-letter vocabulary written to disk, UNet, VAE, DDIM): saved, loaded back offline, fed Spherical-watermark latents
through `latents=`, and the watermark read back. No download anywhere."""

from __future__ import annotations

import json

import torch

from flowlab.vision_gen.kit.diffusers import DiffusersDenoiser, invert_with_diffusers
from flowlab.vision_gen.kit.sampling import generate, invert_to_noise
from flowlab.vision_gen.watermark import SphericalConfig, SphericalWatermark


def _tiny_pipeline(folder, parts):
    from diffusers import StableDiffusionPipeline
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTokenizer

    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    vocab = {
        t: i for i, t in enumerate(["!", *letters, *(c + "</w>" for c in letters), "<|startoftext|>", "<|endoftext|>"])
    }
    (folder / "vocab.json").write_text(json.dumps(vocab))
    (folder / "merges.txt").write_text("#version: 0.2\n")
    tokenizer = CLIPTokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"), model_max_length=8)
    special = {"bos_token_id": vocab["<|startoftext|>"], "eos_token_id": vocab["<|endoftext|>"]}
    text = CLIPTextModel(CLIPTextConfig(
        vocab_size=len(vocab), hidden_size=8, intermediate_size=16, num_attention_heads=2, num_hidden_layers=1,
        max_position_embeddings=8, projection_dim=8, pad_token_id=special["eos_token_id"], **special,
    ))  # fmt: skip
    unet, vae, scheduler = parts
    pipe = StableDiffusionPipeline(
        vae=vae, text_encoder=text, tokenizer=tokenizer, unet=unet, scheduler=scheduler, safety_checker=None,
        feature_extractor=None, requires_safety_checker=False,
    )  # fmt: skip
    pipe.save_pretrained(folder / "pipeline")
    return StableDiffusionPipeline.from_pretrained(folder / "pipeline", local_files_only=True, safety_checker=None)


def test_stable_diffusion_pipeline_embed_generate_invert_extract(tmp_path, tiny_sd_parts):
    torch.manual_seed(0)
    pipe = _tiny_pipeline(tmp_path, tiny_sd_parts)
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
