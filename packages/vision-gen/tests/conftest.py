"""Shared fixtures of the vision-gen tests."""

from __future__ import annotations

import json

import pytest
import torch


@pytest.fixture(scope="session", autouse=True)
def _diffusers_logs_to_pytests_stderr():
    """diffusers makes its log handler on the `sys.stderr` of its first log call. Made inside a command run by
    typer's CliRunner, it would hold the runner's stream, closed when the command returns, and every later warning
    would print a 'Logging error' traceback into another command's output: make it here, outside any runner."""
    from diffusers.utils import logging

    logging.get_logger("diffusers")


@pytest.fixture
def tiny_sd_parts():
    """(unet, vae, scheduler): a Stable-Diffusion-shaped conditional UNet (8x8x4 latents, cross-attention width 8),
    a VAE (16x16 RGB <-> 8x8x4) and an SD-style DDIM scheduler (trailing spacing), all from configs with random
    weights drawn from seed 0 (eval mode)."""
    from diffusers import AutoencoderKL, DDIMScheduler, UNet2DConditionModel

    torch.manual_seed(0)
    unet = UNet2DConditionModel(
        sample_size=8, in_channels=4, out_channels=4, block_out_channels=(4, 8), layers_per_block=1,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"), up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        cross_attention_dim=8, norm_num_groups=2, attention_head_dim=2,
    ).eval()  # fmt: skip
    vae = AutoencoderKL(
        block_out_channels=(4, 8), latent_channels=4, norm_num_groups=2, in_channels=3, out_channels=3,
        down_block_types=("DownEncoderBlock2D",) * 2, up_block_types=("UpDecoderBlock2D",) * 2,
    ).eval()  # fmt: skip
    scheduler = DDIMScheduler(
        beta_schedule="scaled_linear", beta_start=0.00085, beta_end=0.012, set_alpha_to_one=False,
        timestep_spacing="trailing", clip_sample=False,
    )  # fmt: skip
    return unet, vae, scheduler


@pytest.fixture
def tiny_sd_pipeline(tmp_path, tiny_sd_parts):
    """The folder of a tiny `StableDiffusionPipeline` saved with `save_pretrained`: `tiny_sd_parts` (16x16 RGB images,
    8x8x4 latents), a CLIP text encoder (width 8, one layer, random weights from seed 0) and a tokenizer over a
    26-letter vocabulary written to disk; no safety checker."""
    from diffusers import StableDiffusionPipeline
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTokenizer

    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    vocab = {
        t: i for i, t in enumerate(["!", *letters, *(c + "</w>" for c in letters), "<|startoftext|>", "<|endoftext|>"])
    }
    (tmp_path / "vocab.json").write_text(json.dumps(vocab))
    (tmp_path / "merges.txt").write_text("#version: 0.2\n")
    tokenizer = CLIPTokenizer(str(tmp_path / "vocab.json"), str(tmp_path / "merges.txt"), model_max_length=8)
    special = {"bos_token_id": vocab["<|startoftext|>"], "eos_token_id": vocab["<|endoftext|>"]}
    torch.manual_seed(0)
    text = CLIPTextModel(CLIPTextConfig(
        vocab_size=len(vocab), hidden_size=8, intermediate_size=16, num_attention_heads=2, num_hidden_layers=1,
        max_position_embeddings=8, projection_dim=8, pad_token_id=special["eos_token_id"], **special,
    ))  # fmt: skip
    unet, vae, scheduler = tiny_sd_parts
    pipe = StableDiffusionPipeline(
        vae=vae, text_encoder=text, tokenizer=tokenizer, unet=unet, scheduler=scheduler, safety_checker=None,
        feature_extractor=None, requires_safety_checker=False,
    )  # fmt: skip
    pipe.save_pretrained(tmp_path / "pipeline")
    return tmp_path / "pipeline"
