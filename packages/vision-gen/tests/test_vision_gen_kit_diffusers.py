"""diffusers plumbing without downloads: a tiny conditional UNet and VAE from configs; watermark latents ->
FlowLab DDIM on `DiffusersDenoiser` -> VAE decode/encode -> diffusers `DDIMInverseScheduler` and FlowLab `invert`
-> extract (random weights: the test checks plumbing and shapes, and the exact-latent round trip)."""

from __future__ import annotations

import torch

from flowlab.vision_gen.kit.diffusers import DiffusersDenoiser, invert_with_diffusers
from flowlab.vision_gen.kit.sampling import generate, invert_to_noise
from flowlab.vision_gen.watermark import SphericalConfig, SphericalWatermark


def test_watermark_through_tiny_diffusers_unet_and_vae(tiny_sd_parts):
    torch.manual_seed(0)
    unet, vae, sched = tiny_sd_parts
    empty = torch.zeros(1, 4, 8)
    field = DiffusersDenoiser(unet, sched, prompt_embeds=empty)
    wm = SphericalWatermark.from_seed(SphericalConfig.for_latent((4, 8, 8), 16, 7, block_size=16), 0)
    m = torch.randint(0, 2, (2, 16), generator=torch.Generator().manual_seed(1))
    z_t = wm.embed(m, generator=torch.Generator().manual_seed(2))
    assert torch.equal(wm.extract(z_t).bits, m)
    lat = generate(field, z_t, steps=4, method="ddim")
    with torch.no_grad():
        img = vae.decode(lat / vae.config.scaling_factor).sample
        back = vae.encode(img).latent_dist.mean * vae.config.scaling_factor
    assert img.shape == (2, 3, 16, 16) and back.shape == lat.shape
    for z_hat in (
        invert_with_diffusers(unet, sched.config, back, steps=4, encoder_hidden_states=empty.expand(2, -1, -1)),
        invert_to_noise(field, back, steps=4),
    ):
        res = wm.extract(z_hat)
        assert res.bits.shape == m.shape and 0.0 <= float(res.bit_accuracy(m).mean()) <= 1.0
