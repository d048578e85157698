"""GenDR-Pix: pixel-(un)shuffle, padding and RandPad round trips, PadCFG's identities, the nets' initial states, the
stage objectives' gradients, tiny end-to-end training, inference on any size, and the model folder."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from flowlab.vision_gen.gendr_pix.data import sr_pairs, upsample
from flowlab.vision_gen.gendr_pix.evaluate import cost_profile, outputs, sr_quality
from flowlab.vision_gen.gendr_pix.model import NEGATIVE, POSITIVE, GenDRConfig, PixelSR, SRNet
from flowlab.vision_gen.gendr_pix.objective import StageOneObjective, StageTwoObjective
from flowlab.vision_gen.gendr_pix.pixel_ops import (
    crop_pads,
    pad_cfg,
    pad_to_multiple,
    rand_pad,
    shuffle_out,
    unshuffle_in,
)
from flowlab.vision_gen.gendr_pix.sample import cfg_pads, restore, upscale
from flowlab.vision_gen.gendr_pix.store import load_sr, save_sr, saved_models
from flowlab.vision_gen.gendr_pix.train import distill_stage1, distill_stage2, train_espcn, train_naive, train_teacher
from flowlab.vision_gen.kit.autoencoder import AutoencoderConfig, TinyAutoencoder

#: a tiny, untrained x4 autoencoder and config: the nets' plumbing without the artifact
TINY_AE = AutoencoderConfig(size=16, in_channels=3, channels=(4, 8, 8), dataset="photos", steps=2)
TINY = GenDRConfig(autoencoder=TINY_AE, width=8, blocks=1, crop=16, pairs=32, batch_size=4, teacher_steps=3,
                   stage1_steps=3, stage2_steps=3)  # fmt: skip


@pytest.fixture(scope="module")
def pairs():
    return sr_pairs("train", 16, 32, TINY.degradation, seed=0)


@pytest.fixture(scope="module")
def trained(pairs):
    torch.manual_seed(0)
    ae = TinyAutoencoder(TINY_AE).eval().requires_grad_(False)
    teacher = train_teacher(ae, pairs, TINY)
    one = distill_stage1(teacher, pairs, TINY)
    two = distill_stage2(one, teacher, pairs, TINY)
    return teacher, one, two


@pytest.mark.parametrize("r", [1, 2, 4, 8])
def test_pixel_shuffle_round_trip_is_exact(r):
    x = torch.randn(2, 3, 16, 24)
    h = unshuffle_in(x, r)
    assert h.shape == (2, 3 * r * r, 16 // r, 24 // r)
    assert torch.equal(shuffle_out(h, r), x)


def test_unshuffle_of_a_constant_image_is_constant_per_channel():
    x = torch.tensor([0.1, -0.5, 0.9])[None, :, None, None].expand(1, 3, 8, 8)
    h = unshuffle_in(x, 4).view(3, 16, 2, 2)
    assert torch.equal(h, torch.tensor([0.1, -0.5, 0.9])[:, None, None, None].expand(3, 16, 2, 2))


@pytest.mark.parametrize("side", [(13, 17), (16, 16), (5, 30)])
def test_pad_to_multiple_and_crop_back_are_exact(side):
    x = torch.randn(2, 3, *side)
    padded, pads = pad_to_multiple(x, 4)
    assert padded.shape[2] % 4 == 0 and padded.shape[3] % 4 == 0
    assert torch.equal(crop_pads(padded, pads), x)


def test_rand_pad_offsets_are_in_range_and_undone_exactly():
    x = torch.randn(2, 3, 16, 16)
    g = torch.Generator().manual_seed(0)
    seen = set()
    for _ in range(40):
        padded, (left, right, top, bottom) = rand_pad(x, 4, generator=g)
        assert padded.shape == (2, 3, 20, 20) and 0 <= left < 4 and 0 <= top < 4
        assert left + right == 4 and top + bottom == 4
        assert torch.equal(crop_pads(padded, (left, right, top, bottom)), x)
        seen.add((top, left))
    assert len(seen) > 8  # the grid moves


def test_pad_cfg_identities():
    torch.manual_seed(0)
    net = SRNet(3 * 16, 3 * 16, 8, 1)
    model = PixelSR(net, 4)
    x = torch.randn(2, 3, 16, 16)
    c = torch.full((2,), POSITIVE)
    same = ((2, 2, 2, 2), (2, 2, 2, 2))
    with torch.no_grad():
        single = crop_pads(model(F.pad(x, same[0], mode="reflect"), c), same[0])
        torch.testing.assert_close(pad_cfg(model, x, weight=1.0, pads=same), single)
        torch.testing.assert_close(pad_cfg(model, x, weight=0.3, pads=same, negative=False), single)

    conv = torch.nn.Conv2d(3, 3, 3, padding=1, padding_mode="circular")  # translation-equivariant

    def equivariant(x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return conv(x)

    with torch.no_grad():  # both branches pad by >= 1 (the conv's reach): shifted grids, the same cropped output
        first = pad_cfg(equivariant, x, weight=1.0, pads=cfg_pads(4))
        mixed = pad_cfg(equivariant, x, weight=0.5, pads=cfg_pads(4), negative=False)
    torch.testing.assert_close(mixed, first)
    assert not torch.allclose(mixed, pad_cfg(model, x, weight=0.5, pads=cfg_pads(4), negative=False))


def test_cfg_pads_keep_the_side_a_multiple_and_shift_the_grid():
    pos, neg = cfg_pads(8)
    assert pos == (4, 4, 4, 4) and neg == (3, 5, 3, 5)  # the paper's pads at r = 8
    for r in (2, 4, 8):
        for pads in cfg_pads(r):
            assert (pads[0] + pads[1]) % r == 0 and (pads[2] + pads[3]) % r == 0
    with pytest.raises(ValueError, match="r"):
        cfg_pads(1)


def test_new_pixel_students_start_as_bicubic_and_keep_the_body(trained):
    _teacher, one, _ = trained
    net = one.net.with_ends(48, 48, zero_out=True)
    x_up = torch.rand(2, 3, 16, 16) * 2 - 1
    c = torch.tensor([POSITIVE, NEGATIVE])
    assert torch.equal(PixelSR(net, 4)(x_up, c), x_up)
    assert torch.equal(net.body[0].body[2].weight, one.net.body[0].body[2].weight)
    assert net.body[0].body[2].weight.data_ptr() != one.net.body[0].body[2].weight.data_ptr()


def test_stage_objectives_train_student_and_head_but_not_the_frozen_parts(trained, pairs):
    teacher, one, two = trained
    batch = {"x_up": pairs.x_up[:4], "hr": pairs.hr[:4], "c": torch.tensor([0, 0, 1, 0])}
    for objective in (StageOneObjective(one, teacher, TINY), StageTwoObjective(two, one, teacher, TINY)):
        objective.train().requires_grad_(True)
        for module in (objective.teacher, objective.discriminator.backbone):
            module.requires_grad_(False)
        loss, logs = objective(batch, torch.Generator().manual_seed(0))
        loss.backward()
        assert torch.isfinite(loss) and {"l1", "g", "d"} <= set(logs)
        assert objective.student.net.conv_in.weight.grad is not None
        assert objective.discriminator.head[0].weight.grad is not None
        assert objective.teacher.net.conv_in.weight.grad is None
        assert objective.discriminator.backbone.conv_in.weight.grad is None


def test_every_student_trains_its_whole_net_not_only_the_fresh_ends(trained, pairs):
    """The students start from a frozen trained net (the teacher's, stage I's): every weight of theirs must train."""
    teacher, one, two = trained
    naive = train_naive(teacher, pairs, TINY)
    for student, source in ((one, teacher), (two, one), (naive, teacher)):
        for (name, new), old in zip(student.net.body.named_parameters(), source.net.body.parameters(), strict=True):
            assert not torch.equal(new, old), name
    assert all(p.requires_grad for p in one.net.with_ends(48, 48).parameters())


def test_training_runs_end_to_end_and_is_seeded(trained, pairs):
    teacher, _one, _two = trained
    torch.manual_seed(0)
    ae = TinyAutoencoder(TINY_AE).eval().requires_grad_(False)
    again = train_teacher(ae, pairs, TINY)
    for a, b in zip(teacher.net.parameters(), again.net.parameters(), strict=True):
        torch.testing.assert_close(a, b)
    for model in (train_naive(teacher, pairs, TINY), train_espcn(pairs, TINY)):
        assert isinstance(model, PixelSR)
        assert not torch.equal(model(pairs.x_up[:2], torch.zeros(2, dtype=torch.long)), pairs.x_up[:2])


def test_distillation_does_not_depend_on_the_global_rng(trained, pairs):
    teacher, one, _ = trained
    runs = []
    for seed in (1, 2):  # whatever ran before in the process
        torch.manual_seed(seed)
        runs.append(distill_stage2(one, teacher, pairs, TINY))
    for a, b in zip(runs[0].parameters(), runs[1].parameters(), strict=True):
        torch.testing.assert_close(a, b)


def test_restore_and_upscale_take_any_size_and_every_mode(trained):
    teacher, _one, two = trained
    lq = torch.rand(2, 3, 7, 9) * 2 - 1
    for mode in ("single", "ensemble", "padcfg"):
        y = upscale(two, lq, scale=4, factor=4, mode=mode, weight=1.5)
        assert y.shape == (2, 3, 28, 36) and float(y.abs().max()) <= 1
    with torch.no_grad():
        whole = upscale(two, lq, scale=4, factor=4)
        tiles = upscale(two, lq, scale=4, factor=4, tile=20, overlap=4)
    assert tiles.shape == whole.shape and float((tiles - whole).abs().mean()) < 0.05
    x_up = upsample(lq, 4)
    assert restore(teacher, x_up, factor=4).shape == x_up.shape
    with pytest.raises(ValueError, match="mode"):
        restore(two, x_up, factor=4, mode="tta")
    with pytest.raises(ValueError, match="lq"):
        upscale(two, lq[:, :1], scale=4, factor=4)
    with pytest.raises(ValueError, match="lq"):
        upscale(two, torch.full_like(lq, float("nan")), scale=4, factor=4)


def test_quality_and_cost_rows(trained):
    teacher, _, two = trained
    test = sr_pairs("test", 16, 4, TINY.degradation, seed=1)
    row = sr_quality(outputs(two, test, factor=4), test, period=4)
    assert set(row) == {"psnr", "ssim", "artifact"} and all(v == v for v in row.values())
    bicubic = sr_quality(outputs(None, test, factor=4), test, period=4)
    assert bicubic["psnr"] > 10
    cost = cost_profile({"teacher": teacher, "student": two}, (32, 64), factor=4, repeats=1)
    assert cost["teacher"][64]["bytes"] > cost["student"][64]["bytes"] > 0
    assert cost["teacher"][64]["bytes"] > cost["teacher"][32]["bytes"]


def test_model_folder_round_trip_and_bad_folders(trained, tmp_path, monkeypatch):
    teacher, one, two = trained
    monkeypatch.setattr(
        "flowlab.vision_gen.kit.autoencoder.tiny_autoencoder", lambda config, device=None: teacher.autoencoder
    )
    save_sr(tmp_path, {"teacher": teacher, "stage1": one, "stage2": two}, TINY)
    assert saved_models(tmp_path) == ["teacher", "stage1", "stage2"]
    x_up = torch.rand(1, 3, 16, 16) * 2 - 1
    c = torch.zeros(1, dtype=torch.long)
    for name, model in (("stage2", two), ("stage1", one), ("teacher", teacher)):
        loaded, config = load_sr(tmp_path, name)
        assert config == TINY
        torch.testing.assert_close(loaded(x_up, c), model(x_up, c))
    with pytest.raises(ValueError, match="another config"):
        save_sr(tmp_path, {"stage2": two}, replace(TINY, seed=1))
    with pytest.raises(ValueError, match="not a GenDR-Pix"):
        load_sr(tmp_path / "missing")
    (tmp_path / "stage2.safetensors").write_bytes(b"not weights")
    with pytest.raises(ValueError, match=r"stage2\.safetensors does not hold"):
        load_sr(tmp_path, "stage2")
    (tmp_path / "config.json").write_text("{")
    with pytest.raises(ValueError, match="not a GenDR-Pix model folder config"):
        load_sr(tmp_path, "stage2")
    with pytest.raises(ValueError, match="names"):
        save_sr(tmp_path / "other", {"vae": two}, TINY)


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"crop": 20}, "crop"),
        ({"width": 0}, "width"),
        ({"negative_share": 1.0}, "negative_share"),
        ({"fourier_radius": -1}, "fourier_radius"),
        ({"gan_weight": -1.0}, "gan_weight"),
        ({"autoencoder": AutoencoderConfig()}, "autoencoder"),
    ],
)
def test_config_bad_values_name_the_field(fields, match):
    with pytest.raises(ValueError, match=match):
        GenDRConfig(**fields)


def test_training_rejects_a_mismatched_autoencoder_or_pairs(pairs):
    with pytest.raises(ValueError, match="autoencoder"):
        train_teacher(TinyAutoencoder(AutoencoderConfig()), pairs, TINY)
    with pytest.raises(ValueError, match="pairs"):
        train_teacher(TinyAutoencoder(TINY_AE), pairs.hr, TINY)
