"""MOLM's WOUAF-style baseline: a fresh model and a model with no key decode exactly as the frozen decoder, the
per-sample modulation equals explicitly modulated conv weights, batched keys equal each sample alone, training
leaves the decoder bit-identical, and bad keys or decoders are named."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from flowlab.vision_gen.kit.autoencoder import AutoencoderConfig, TinyAutoencoder
from flowlab.vision_gen.kit.metrics import DigitsFeatureNet
from flowlab.vision_gen.watermark.molm.baselines import WouafLite
from flowlab.vision_gen.watermark.molm.train import TrainConfig, train_molm

pytestmark = pytest.mark.usefixtures("one_thread")


def _decoder() -> nn.Module:
    torch.manual_seed(0)
    return TinyAutoencoder(AutoencoderConfig()).decoder.eval()


def _randomised(decoder: nn.Module) -> WouafLite:
    model = WouafLite(decoder, 8)
    last = model.mapping[-1]
    last.weight.data = 0.2 * torch.randn(last.weight.shape, generator=torch.Generator().manual_seed(1))
    return model


def test_a_fresh_model_and_no_key_give_the_frozen_decoder_exactly():
    decoder, z = _decoder(), torch.randn(6, 4, 8, 8)
    frozen = decoder(z)
    keys = torch.randint(0, 2, (6, 8), generator=torch.Generator().manual_seed(0))
    model = WouafLite(decoder, 8)
    assert torch.equal(model.mark(z, keys), frozen)
    model = _randomised(decoder)
    marked = model.mark(z, keys)
    assert (marked - frozen).abs().max() > 1e-3
    assert torch.equal(model.clean(z), frozen) and torch.equal(decoder(z), frozen)  # the hooks are off without a key
    assert torch.equal(model.mark(z, keys), marked)  # the same key, the same output


def test_the_modulation_equals_conv_weights_scaled_along_their_input_channels():
    decoder, z = _decoder(), torch.randn(1, 4, 8, 8)
    model = _randomised(decoder)
    key = torch.tensor([[1, 0, 0, 1, 1, 0, 1, 0]])
    reference = copy.deepcopy(decoder)
    reference._forward_pre_hooks.clear()
    convs = [m for m in reference.modules() if isinstance(m, nn.Conv2d)]
    for conv in convs:
        conv._forward_pre_hooks.clear()
    with torch.no_grad():
        scales = model.scales(key)[0].split([c.in_channels for c in convs])
        for conv, s in zip(convs, scales, strict=True):
            conv.weight.mul_(s[None, :, None, None])
        assert (scales[0] - 1).abs().max() > 1e-2
        torch.testing.assert_close(model.mark(z, key), reference(z), rtol=1e-5, atol=1e-5)


def test_batched_keys_equal_each_sample_alone():
    model, z = _randomised(_decoder()), torch.randn(5, 4, 8, 8)
    keys = torch.randint(0, 2, (5, 8), generator=torch.Generator().manual_seed(2))
    batched = model.mark(z, keys)
    for i in range(5):
        torch.testing.assert_close(model.mark(z[i : i + 1], keys[i : i + 1]), batched[i : i + 1], rtol=0, atol=1e-5)


def test_training_moves_the_mapping_and_leaves_the_decoder_bit_identical():
    decoder = _decoder()
    frozen = {k: v.clone() for k, v in decoder.state_dict().items()}
    model = WouafLite(decoder, 8)
    torch.manual_seed(0)
    train_molm(model, torch.randn(16, 4, 8, 8), TrainConfig(steps=2, batch_size=4), DigitsFeatureNet().eval())
    assert all(torch.equal(decoder.state_dict()[k], v) for k, v in frozen.items())
    assert model.mapping[-1].weight.abs().sum() > 0


def test_bad_keys_and_decoders_are_named():
    model, z = WouafLite(_decoder(), 8), torch.randn(2, 4, 8, 8)
    for bad, match in ((torch.ones(2, 7), "keys"), (torch.full((2, 8), 2), "bits"), (torch.ones(3, 8), "batch")):
        with pytest.raises(ValueError, match=match):
            model.mark(z, bad)
    assert torch.equal(model.clean(z), model.decoder(z))  # a refused key leaves no modulation behind
    with pytest.raises(ValueError, match="decoder"):
        WouafLite(nn.Sequential(nn.Linear(4, 4)), 8)
    with pytest.raises(ValueError, match="bits"):
        WouafLite(_decoder(), 0)
