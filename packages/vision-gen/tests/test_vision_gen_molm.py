"""MOLM: routing is a bijective pure function of the key, zero-initialised markers and markers switched off give the
frozen decoder exactly, batched per-sample routing equals each sample alone, a training step leaves the decoder
bit-identical, markers attach to a diffusers AutoencoderKL decoder (resnets and attention), key and model files
fail with clear errors, and a short training run reads held-out keys."""

from __future__ import annotations

import itertools
import json

import pytest
import torch

from flowlab.vision_gen.kit.autoencoder import AutoencoderConfig, TinyAutoencoder
from flowlab.vision_gen.kit.metrics import DigitsFeatureNet
from flowlab.vision_gen.watermark.base import write_key_folder
from flowlab.vision_gen.watermark.molm.markers import MarkerSet, autoencoder_kl_blocks, key_to_routes, routes_to_key
from flowlab.vision_gen.watermark.molm.model import MolmConfig, MolmModel, key_split, sample_keys
from flowlab.vision_gen.watermark.molm.objective import forgery_loss
from flowlab.vision_gen.watermark.molm.store import load_molm_key, save_molm_key
from flowlab.vision_gen.watermark.molm.train import TrainConfig, train_molm

pytestmark = pytest.mark.usefixtures("one_thread")


def _model(seed: int = 0, **kw) -> MolmModel:
    torch.manual_seed(seed)
    return MolmModel(TinyAutoencoder(AutoencoderConfig()).decoder.eval(), MolmConfig(**kw))


def _randomise(model: MolmModel) -> None:
    g = torch.Generator().manual_seed(3)
    for adapter in model.markers.adapters:
        adapter.up.data = 0.3 * torch.randn(adapter.up.shape, generator=g)


def test_routing_is_a_bijective_pure_function_of_the_key():
    keys = torch.tensor(list(itertools.product([0, 1], repeat=8)))
    routes = key_to_routes(keys, 4, 4)
    assert torch.equal(routes, key_to_routes(keys.clone(), 4, 4))
    assert len({tuple(r) for r in routes.tolist()}) == 256 and routes.max() == 3
    assert torch.equal(routes_to_key(routes, 4), keys)
    assert key_to_routes(torch.tensor([[1, 0, 0, 1, 1, 1, 0, 0]]), 4, 4).tolist() == [[2, 1, 3, 0]]
    for bad, match in ((torch.ones(2, 7), "keys"), (torch.full((1, 8), 2), "bits")):
        with pytest.raises(ValueError, match=match):
            key_to_routes(bad, 4, 4)
    with pytest.raises(ValueError, match="num_adapters"):
        key_to_routes(keys, 4, 3)


def test_fresh_markers_and_markers_off_restore_the_frozen_decoder_exactly():
    model, z = _model(), torch.randn(6, 4, 8, 8)
    frozen = model.decoder(z)  # routes off after attach
    keys = torch.randint(0, 2, (6, 8))
    assert torch.equal(model.mark(z, keys), frozen)
    _randomise(model)
    marked = model.mark(z, keys)
    assert not torch.allclose(marked, frozen)
    assert torch.equal(model.clean(z), frozen)
    assert torch.equal(model.mark(z, keys), marked)  # the same key, the same output


def test_batched_routing_equals_each_sample_alone():
    model, z = _model(), torch.randn(5, 4, 8, 8)
    _randomise(model)
    keys = torch.randint(0, 2, (5, 8), generator=torch.Generator().manual_seed(0))
    batched = model.mark(z, keys)
    for i in range(5):
        assert torch.allclose(model.mark(z[i : i + 1], keys[i : i + 1]), batched[i : i + 1], atol=1e-5)


def test_a_training_run_leaves_the_decoder_bit_identical_and_moves_the_markers(tmp_path):
    model = _model()
    before = {k: v.clone() for k, v in model.decoder.state_dict().items() if ".base." in k or "adapters" not in k}
    frozen = {k: v for k, v in before.items() if not k.endswith((".down", ".up"))}
    torch.manual_seed(0)
    train_molm(model, torch.randn(16, 4, 8, 8), TrainConfig(steps=2, batch_size=4), DigitsFeatureNet().eval())
    after = model.decoder.state_dict()
    assert all(torch.equal(after[k], v) for k, v in frozen.items())
    assert any(a.up.abs().sum() > 0 for a in model.markers.adapters)


def test_checkpoint_resume_equals_one_run(tmp_path):
    z, net = torch.randn(16, 4, 8, 8), DigitsFeatureNet().eval()
    one = _model()
    train_molm(one, z, TrainConfig(steps=4, batch_size=4), net)
    two = _model()
    train_molm(two, z, TrainConfig(steps=4, batch_size=4), net, ckpt_dir=tmp_path / "ckpt")
    resumed = _model()
    train_molm(resumed, z, TrainConfig(steps=4, batch_size=4), net, ckpt_dir=tmp_path / "ckpt")
    for a, b in zip(one.trainable(), resumed.trainable(), strict=True):
        assert torch.allclose(a, b, atol=1e-6)


def test_markers_on_a_diffusers_autoencoder_kl_decoder():
    from diffusers import AutoencoderKL

    torch.manual_seed(0)
    vae = AutoencoderKL(block_out_channels=(4, 8), latent_channels=4, norm_num_groups=2, in_channels=3,
                        out_channels=3, down_block_types=("DownEncoderBlock2D",) * 2,
                        up_block_types=("UpDecoderBlock2D",) * 2).eval().requires_grad_(False)  # fmt: skip
    z = torch.randn(3, 4, 4, 4)  # frozen first: torch may pick other conv kernels when weights need gradients
    frozen = vae.decode(z).sample
    blocks = autoencoder_kl_blocks(vae.decoder)
    assert "mid_block.attentions.0.to_v" in blocks and len(blocks) == 7
    markers = MarkerSet.attach(vae.decoder, blocks, num_adapters=2, rank=2)
    assert markers.key_bits == 7
    for adapter in markers.adapters:
        adapter.up.data.normal_()
    keys = torch.randint(0, 2, (3, 7), generator=torch.Generator().manual_seed(0))
    markers.route(keys)
    marked = vae.decode(z).sample
    assert marked.shape == frozen.shape and not torch.allclose(marked, frozen)
    markers.off()
    assert torch.equal(vae.decode(z).sample, frozen)
    assert all(not p.requires_grad for n, p in vae.decoder.named_parameters() if not n.endswith((".down", ".up")))
    with pytest.raises(ValueError, match="decoder"):
        autoencoder_kl_blocks(torch.nn.Linear(2, 2))


def test_key_split_halves_the_key_space():
    parity = key_split(8, 0)
    train, held = (sample_keys(200, parity, h, generator=torch.Generator().manual_seed(h)) for h in (0, 1))
    assert bool(((train @ parity) % 2 == 0).all()) and bool(((held @ parity) % 2 == 1).all())


def test_key_files_round_trip_and_fail_clearly(tmp_path):
    key = torch.tensor([1, 0, 1, 1, 0, 0, 1, 0])
    save_molm_key(tmp_path / "k", key)
    assert torch.equal(load_molm_key(tmp_path / "k", 8), key)
    with pytest.raises(ValueError, match="8-bit"):
        load_molm_key(tmp_path / "k", 16)
    (tmp_path / "k" / "tensors.safetensors").write_bytes(b"garbage" * 10)
    with pytest.raises(ValueError, match="corrupted"):
        load_molm_key(tmp_path / "k", 8)
    write_key_folder(tmp_path / "shape", "molm", {"key_bits": 8}, {"key": torch.ones(4, dtype=torch.uint8)})
    with pytest.raises(ValueError, match="shape"):
        load_molm_key(tmp_path / "shape", 8)
    write_key_folder(tmp_path / "other", "spherical", {}, {"key": torch.ones(8)})
    with pytest.raises(ValueError, match="spherical"):
        load_molm_key(tmp_path / "other", 8)
    write_key_folder(tmp_path / "twos", "molm", {"key_bits": 8}, {"key": torch.full((8,), 2, dtype=torch.uint8)})
    with pytest.raises(ValueError, match="other than 0 and 1"):
        load_molm_key(tmp_path / "twos", 8)
    (tmp_path / "k" / "key.json").write_text(json.dumps({"format": "x"}))
    with pytest.raises(ValueError, match=r"key\.json"):
        load_molm_key(tmp_path / "k", 8)
    with pytest.raises(ValueError, match="key"):
        save_molm_key(tmp_path / "bad", torch.ones(2, 2))


@pytest.mark.parametrize(("kwargs", "name"), [({"num_adapters": 3}, "num_adapters"), ({"rank": 0}, "rank"),
                                              ({"blocks": ()}, "blocks"), ({"size": 10}, "size")])  # fmt: skip
def test_bad_configs_are_named(kwargs, name):
    with pytest.raises(ValueError, match=name):
        MolmConfig(**kwargs)
    with pytest.raises(ValueError, match="lr"):
        TrainConfig(lr=float("nan"))


def test_the_forgery_term_is_zero_for_an_extractor_that_reads_nothing_and_reaches_the_markers():
    gen = torch.Generator().manual_seed(0)
    marked, clean, others = (torch.rand(n, 1, 8, 8, generator=gen) * 2 - 1 for n in (4, 4, 6))
    silent = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 8))
    torch.nn.init.zeros_(silent[1].weight), torch.nn.init.zeros_(silent[1].bias)
    assert forgery_loss(silent, marked, clean, others).abs() < 1e-6
    reader = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 8))
    marked.requires_grad_(True)
    loss = forgery_loss(reader, marked, clean, others)
    loss.backward()
    assert loss > 0 and marked.grad.abs().sum() > 0  # the forged images carry the pool's residual
    for kwargs, name in (({"forgery_weight": -1.0}, "forgery_weight"), ({"forgery_weight": 1.0, "forgery_pool": 1},
                         "forgery_pool"), ({"forgery_weight": 1.0, "forgery_pool": 64}, "forgery_pool")):  # fmt: skip
        with pytest.raises(ValueError, match=name):
            TrainConfig(**kwargs)


def test_the_forgery_term_of_a_linear_reader_in_closed_form():
    # reader l = W u + b on unit images u = (x + 1) / 2; no clamping: l(forged) - l(clean) = W r, r the residual
    gen = torch.Generator().manual_seed(1)
    clean = torch.rand(5, 1, 8, 8, generator=gen) - 0.5
    marked = clean + 0.1 * torch.randn(5, 1, 8, 8, generator=gen)
    others = torch.rand(7, 1, 8, 8, generator=gen) - 0.5
    reader = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 8))
    w = reader[1].weight.detach().double()
    shift = w @ ((marked - clean).double().mean(0).flatten() / 2)
    assert forgery_loss(reader, marked, clean, others).item() == pytest.approx(shift.pow(2).mean().item(), rel=1e-5)


def test_bad_latents_are_named():
    with pytest.raises(ValueError, match="latents"):
        train_molm(_model(), torch.full((4, 4, 8, 8), float("nan")), TrainConfig(steps=1), DigitsFeatureNet())


def _quick_training(steps: int) -> tuple[float, float, float]:
    from flowlab.vision_gen.kit.autoencoder import tiny_autoencoder
    from flowlab.vision_gen.kit.data import load_digits_images
    from flowlab.vision_gen.kit.metrics import digits_feature_net

    ae = tiny_autoencoder()
    with torch.no_grad():
        z = ae.encode(load_digits_images(16, split="train").x).latent_dist.mode()
        zt = ae.encode(load_digits_images(16, split="test").x).latent_dist.mode()
    torch.manual_seed(0)
    model = MolmModel(ae.decoder, MolmConfig())
    train_molm(model, z, TrainConfig(steps=steps), digits_feature_net())
    parity = key_split(8, 0)
    accs = []
    with torch.no_grad():
        for half in (0, 1):
            keys = sample_keys(270, parity, half, generator=torch.Generator().manual_seed(5))
            accs.append(float(((model.extractor((model.mark(zt, keys) + 1) / 2) > 0).long() == keys).float().mean()))
        clean = float(((model.extractor((model.clean(zt) + 1) / 2) > 0).long() == keys).float().mean())
    return accs[0], accs[1], clean


@pytest.mark.slow
def test_quick_training_reads_held_out_keys():
    seen, held, clean = _quick_training(600)
    assert held >= 0.9 and abs(seen - held) <= 0.03
    assert abs(clean - 0.5) < 3 * (0.25 / (270 * 8)) ** 0.5 + 0.05
