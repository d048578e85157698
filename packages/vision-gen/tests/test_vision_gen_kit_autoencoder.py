"""The tiny autoencoder: diffusers-shaped encode/decode, seeded posteriors, training that reconstructs digits, the
cached artifact's round trip, `load_autoencoder` on diffusers folders, and the drop-in check against a tiny random
`AutoencoderKL` through diffusers' own image processor, latent retrieval and `StableDiffusionPipeline`."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest
import torch

from flowlab.core.artifacts import is_cached
from flowlab.vision_gen.kit.autoencoder import (
    AutoencoderConfig,
    TinyAutoencoder,
    autoencoder_artifact,
    load_autoencoder,
    save_autoencoder,
    tiny_autoencoder,
    train_autoencoder,
)
from flowlab.vision_gen.kit.data import load_digits_images

SMALL = AutoencoderConfig(channels=(8, 16), steps=200, batch_size=32, lr=4e-3)
#: test-split PSNR (dB, on [0, 1] pixels) the SMALL training must beat (it reaches 28.1 dB; untrained: 7.2 dB)
PSNR_FLOOR = 24.0
#: SD-shaped RGB autoencoder with the latent shape of conftest's tiny AutoencoderKL (16x16x3 <-> 8x8x4)
RGB = AutoencoderConfig(in_channels=3, latent_channels=4, channels=(8, 16))


def _psnr(ae, images: torch.Tensor) -> float:
    with torch.no_grad():
        out = ae.decode(ae.encode(images).latent_dist.mode()).sample.clamp(-1, 1)
    return 10 * math.log10(1 / float(((out - images) / 2).square().mean()))


@pytest.fixture(scope="module")
def trained() -> TinyAutoencoder:
    return train_autoencoder(load_digits_images(16, split="train").x, SMALL)


def test_encode_decode_shapes_and_diffusers_outputs():
    from diffusers.models.autoencoders.vae import DecoderOutput, DiagonalGaussianDistribution
    from diffusers.models.modeling_outputs import AutoencoderKLOutput

    x = torch.randn(3, 1, 16, 16, generator=torch.Generator().manual_seed(0))
    for channels, side in (((8, 16), 8), ((8, 16, 16), 4)):
        ae = TinyAutoencoder(replace(SMALL, channels=channels)).eval()
        assert 2 ** (len(ae.config.block_out_channels) - 1) == 16 // side == ae.settings.downsample
        enc = ae.encode(x)
        assert isinstance(enc, AutoencoderKLOutput) and isinstance(enc.latent_dist, DiagonalGaussianDistribution)
        assert enc.latent_dist.mean.shape == (3, ae.config.latent_channels, side, side)
        dec = ae.decode(enc.latent_dist.mode())
        assert isinstance(dec, DecoderOutput) and dec.sample.shape == x.shape
        (posterior,) = ae.encode(x, return_dict=False)
        (image,) = ae.decode(posterior.mean, return_dict=False)
        assert torch.equal(posterior.mean, enc.latent_dist.mean) and torch.equal(image, dec.sample)
        assert torch.equal(ae(x).sample, dec.sample)
    # any multiple of the factor, not only config.size
    assert ae.decode(ae.encode(torch.zeros(1, 1, 32, 8)).latent_dist.mean).sample.shape == (1, 1, 32, 8)
    assert ae.dtype == torch.float32 and ae.device == torch.device("cpu")


def test_posterior_draws_are_seeded_and_the_plain_autoencoder_is_deterministic():
    x = torch.randn(2, 1, 16, 16, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        post = TinyAutoencoder(SMALL).encode(x).latent_dist
        a, b = (post.sample(generator=torch.Generator().manual_seed(5)) for _ in range(2))
        c = post.sample(generator=torch.Generator().manual_seed(6))
        assert torch.equal(a, b) and not torch.allclose(a, c) and bool((post.kl() > 0).all())
        plain = TinyAutoencoder(replace(SMALL, kl=False)).encode(x).latent_dist
        draw = plain.sample(generator=torch.Generator().manual_seed(5))
    assert torch.equal(draw, plain.mean) and torch.equal(plain.mode(), plain.mean)
    assert float(plain.std.abs().max()) == 0.0 and float(plain.kl().abs().max()) == 0.0


def test_training_reconstructs_digits_and_sets_the_scaling_factor(trained):
    test = load_digits_images(16, split="test").x
    with torch.random.fork_rng():
        torch.manual_seed(0)
        untrained = TinyAutoencoder(SMALL).eval()
    ours, before = _psnr(trained, test), _psnr(untrained, test)
    assert ours > PSNR_FLOOR and ours > before + 10
    assert not trained.training and not any(p.requires_grad for p in trained.parameters())
    # the latents the pipelines see (draw * scaling_factor) have unit std on the training images
    train = load_digits_images(16, split="train").x
    with torch.no_grad():
        z = trained.encode(train).latent_dist.sample(generator=torch.Generator().manual_seed(1))
    assert abs(float((z * trained.config.scaling_factor).std()) - 1) < 0.02
    # a plain autoencoder trains too, and seeds reproduce
    plain = train_autoencoder(train[:256], replace(SMALL, kl=False, steps=60))
    again = train_autoencoder(train[:256], replace(SMALL, kl=False, steps=60))
    assert _psnr(plain, test) > before + 5
    assert all(torch.equal(p, q) for p, q in zip(plain.state_dict().values(), again.state_dict().values(), strict=True))


def _round_trip(vae, pixels: torch.Tensor, processor) -> tuple[torch.Tensor, torch.Tensor]:
    """What SD img2img and txt2img do with a VAE: preprocess, encode, retrieve and scale the latents, unscale,
    decode (with `generator=`), postprocess. Returns (latents, images in [0, 1])."""
    from diffusers.pipelines.stable_diffusion.pipeline_stable_diffusion_img2img import retrieve_latents

    image = processor.preprocess(pixels).to(device=vae.device, dtype=vae.dtype)
    g = torch.Generator().manual_seed(0)
    latents = retrieve_latents(vae.encode(image), generator=g) * vae.config.scaling_factor
    decoded = vae.decode(latents / vae.config.scaling_factor, return_dict=False, generator=g)[0]
    return latents, processor.postprocess(decoded, output_type="pt", do_denormalize=[True] * len(decoded))


def test_drop_in_for_autoencoderkl_through_diffusers_image_code(tiny_sd_parts):
    from diffusers.image_processor import VaeImageProcessor

    kl_vae = tiny_sd_parts[1]
    tiny = TinyAutoencoder(RGB).eval()
    pixels = torch.rand(2, 3, 16, 16, generator=torch.Generator().manual_seed(0))
    outs = []
    for vae in (kl_vae, tiny):
        assert vae.config.latent_channels == 4 and vae.config.force_upcast in (True, False)
        processor = VaeImageProcessor(vae_scale_factor=2 ** (len(vae.config.block_out_channels) - 1))
        with torch.no_grad():
            outs.append(_round_trip(vae, pixels, processor))
    (kl_lat, kl_img), (lat, img) = outs
    assert lat.shape == kl_lat.shape == (2, 4, 8, 8) and lat.dtype == kl_lat.dtype
    assert img.shape == kl_img.shape == pixels.shape and img.dtype == kl_img.dtype
    assert float(img.min()) >= 0 and float(img.max()) <= 1


def _text_parts(folder):
    """An offline CLIP tokenizer over a 26-letter vocabulary and a random 1-layer CLIP text model (width 8)."""
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTokenizer

    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    tokens = ["!", *letters, *(c + "</w>" for c in letters), "<|startoftext|>", "<|endoftext|>"]
    vocab = {t: i for i, t in enumerate(tokens)}
    (folder / "vocab.json").write_text(json.dumps(vocab))
    (folder / "merges.txt").write_text("#version: 0.2\n")
    tokenizer = CLIPTokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"), model_max_length=8)
    bos, eos = vocab["<|startoftext|>"], vocab["<|endoftext|>"]
    text = CLIPTextModel(CLIPTextConfig(
        vocab_size=len(vocab), hidden_size=8, intermediate_size=16, num_attention_heads=2, num_hidden_layers=1,
        max_position_embeddings=8, projection_dim=8, bos_token_id=bos, eos_token_id=eos, pad_token_id=eos,
    ))  # fmt: skip
    return tokenizer, text.eval()


def test_drop_in_for_autoencoderkl_in_a_stable_diffusion_pipeline(tmp_path, tiny_sd_parts):
    """The acceptance test: `StableDiffusionPipeline(vae=TinyAutoencoder(...))` runs end to end; it derives the
    same latent shape as with the tiny AutoencoderKL, and its images are our decoder's output unscaled by our
    `scaling_factor`."""
    from diffusers import StableDiffusionPipeline

    torch.manual_seed(0)
    tokenizer, text = _text_parts(tmp_path)
    unet, kl_vae, scheduler = tiny_sd_parts
    tiny = TinyAutoencoder(RGB, scaling_factor=0.5).eval()
    results = {}
    for name, vae in (("kl", kl_vae), ("tiny", tiny)):
        pipe = StableDiffusionPipeline(
            vae=vae, text_encoder=text, tokenizer=tokenizer, unet=unet, scheduler=scheduler, safety_checker=None,
            feature_extractor=None, requires_safety_checker=False,
        )  # fmt: skip
        pipe.set_progress_bar_config(disable=True)
        assert pipe.vae_scale_factor == 2
        for kind in ("latent", "pt"):
            g = torch.Generator().manual_seed(3)
            results[name, kind] = pipe(
                prompt=["a cat", "a dog"], num_inference_steps=2, guidance_scale=1.0, output_type=kind, generator=g
            ).images
    assert results["tiny", "pt"].shape == results["kl", "pt"].shape == (2, 3, 16, 16)
    assert results["tiny", "pt"].dtype == results["kl", "pt"].dtype == torch.float32
    torch.testing.assert_close(results["tiny", "latent"], results["kl", "latent"])
    with torch.no_grad():
        expected = (tiny.decode(results["tiny", "latent"] / 0.5).sample / 2 + 0.5).clamp(0, 1)
    torch.testing.assert_close(results["tiny", "pt"], expected)


def test_artifact_builds_once_and_round_trips(tmp_path, monkeypatch):
    monkeypatch.setenv("FLOWLAB_CACHE", str(tmp_path))
    config = replace(SMALL, size=8, steps=12, batch_size=16)
    assert not is_cached(autoencoder_artifact(config))
    built = tiny_autoencoder(config)
    assert is_cached(autoencoder_artifact(config))
    loaded = tiny_autoencoder(config)
    direct = train_autoencoder(load_digits_images(8, split="train").x, config)
    x = load_digits_images(8, split="test").x[:8]
    with torch.no_grad():
        a, b, c = (m.decode(m.encode(x).latent_dist.mode()).sample for m in (built, loaded, direct))
    assert torch.equal(a, b) and torch.equal(a, c)
    assert built.config.scaling_factor == loaded.config.scaling_factor == direct.config.scaling_factor
    assert not loaded.training and not any(p.requires_grad for p in loaded.parameters())
    tiny_autoencoder(replace(config, kl=False))
    assert len(list((tmp_path / "artifacts" / "vision.tiny_autoencoder").glob("*/manifest.json"))) == 2


def test_photos_autoencoder_artifact_trains_on_train_photo_crops(tmp_path, monkeypatch):
    """An RGB autoencoder on photo crops: keyed on the train photos' files, and it learns (PSNR on validation-photo
    crops above the untrained net's by 3 dB after 60 steps)."""
    from flowlab.vision_gen.kit.photos import photo_crops, photo_split

    monkeypatch.setenv("FLOWLAB_CACHE", str(tmp_path))
    config = replace(RGB, dataset="photos", steps=60, batch_size=16, lr=4e-3)
    artifact = autoencoder_artifact(config)
    assert len(artifact.inputs) == len(photo_split()["train"])
    val = photo_crops("val", 16, 32, seed=1).x
    torch.manual_seed(0)
    assert _psnr(tiny_autoencoder(config), val) > _psnr(TinyAutoencoder(config), val) + 3


def test_load_autoencoder_opens_our_folders_and_diffusers_folders(tmp_path, tiny_sd_parts):
    from diffusers import AutoencoderKL

    tiny = TinyAutoencoder(RGB, scaling_factor=0.25).eval()
    back = load_autoencoder(save_autoencoder(tiny, tmp_path / "tiny") / "weights.pt")
    x = torch.rand(2, 3, 16, 16, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(tiny(x).sample, back(x).sample)
    assert back.config == tiny.config and back.settings == RGB
    kl_vae = tiny_sd_parts[1]
    kl_vae.save_pretrained(tmp_path / "kl")
    kl_back = load_autoencoder(str(tmp_path / "kl"))
    assert isinstance(kl_back, AutoencoderKL)
    with torch.no_grad():
        torch.testing.assert_close(kl_back(x).sample, kl_vae(x).sample)
    with pytest.raises(FileNotFoundError, match="path_or_folder"):
        load_autoencoder(tmp_path / "missing")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "config.json").write_text(json.dumps({"_class_name": "UNet2DModel"}))
    with pytest.raises(ValueError, match="path_or_folder"):
        load_autoencoder(tmp_path / "other")


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda ae: ae.encode(torch.zeros(2, 3, 16, 16)), r"x: expected shape \(B, 1, H, W\)"),
        (lambda ae: ae.encode(torch.zeros(2, 1, 15, 15)), "x: expected H and W positive multiples of 2"),
        (lambda ae: ae.encode(torch.full((2, 1, 16, 16), float("nan"))), "x: expected finite"),
        (lambda ae: ae.encode(torch.zeros(2, 1, 16, 16).tolist()), "x: expected a torch.Tensor"),
        (lambda ae: ae.encode(torch.zeros(1, 16, 16)), r"x: expected shape"),
        (lambda ae: ae.encode(torch.zeros(2, 1, 16, 16, dtype=torch.long)), "x: expected a floating-point"),
        (lambda ae: ae.decode(torch.zeros(2, 3, 8, 8)), r"z: expected shape \(B, 4, H, W\)"),
        (lambda ae: ae.set_scaling_factor(0.0), "value: expected a finite scaling factor"),
        (lambda ae: train_autoencoder(torch.zeros(4, 1, 8, 8), SMALL), "images: expected 16x16"),
        (
            lambda ae: train_autoencoder(torch.zeros(2, 1, 16, 16), {"steps": 1}),
            "config: expected an AutoencoderConfig",
        ),
        (lambda ae: autoencoder_artifact(RGB), "config: dataset 'digits' has in_channels 1"),
        (lambda ae: TinyAutoencoder({"size": 16}), "settings: expected an AutoencoderConfig"),
        (lambda ae: AutoencoderConfig(channels=()), "channels: expected a non-empty tuple"),
        (lambda ae: AutoencoderConfig(size=18, channels=(8, 8, 8)), "size: expected a multiple of the downsampling"),
        (lambda ae: AutoencoderConfig(kl_weight=-1.0), "kl_weight: expected a finite number >= 0"),
        (lambda ae: AutoencoderConfig(lr=0.0), "lr: expected a finite number > 0"),
        (lambda ae: AutoencoderConfig(steps=0), "steps: expected a positive int"),
        (lambda ae: AutoencoderConfig(dataset="cifar"), "dataset: expected one of"),
        (lambda ae: AutoencoderConfig(device="tpu"), "device: expected a device type"),
    ],
)
def test_bad_inputs_are_rejected(call, match):
    ae = TinyAutoencoder(SMALL)
    with pytest.raises(ValueError, match=match):
        call(ae)
