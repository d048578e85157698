"""The class-conditional digits teachers: ClassDiT labels and null label, each family's loss falling, one teacher
reaching the same ODE endpoint on either family's sampler, guidance, the artifact built once, bad input."""

from __future__ import annotations

import itertools

import pytest
import torch

from flowlab.core.artifacts import entries
from flowlab.core.grids import uniform
from flowlab.core.nets.family import rf_sigma, rf_time
from flowlab.core.schedules import EDM
from flowlab.core.solvers import solve_ode
from flowlab.vision_gen.kit.data import load_digits_images
from flowlab.vision_gen.kit.nets import ClassDiT, DiTField
from flowlab.vision_gen.kit.teachers import (
    DigitsTeacher,
    TeacherConfig,
    digits_teacher,
    teacher_loss,
    train_teacher,
)

TINY = {"dim": 16, "depth": 1, "heads": 2, "batch_size": 32}


@pytest.fixture(scope="module")
def trained():
    """One briefly trained teacher per family (60 steps: enough for a non-trivial field)."""
    return {f: train_teacher(TeacherConfig(family=f, steps=60, **TINY)) for f in ("rf", "edm", "ddpm")}


def test_class_dit_labels_change_the_output_and_none_is_the_null_label():
    torch.manual_seed(0)
    net = ClassDiT(8, dim=16, depth=1, heads=2)
    for p in net.parameters():  # leave adaLN-Zero's zero init, so the labels reach the output
        torch.nn.init.normal_(p, std=0.2)
    x, t = torch.randn(4, 1, 8, 8), torch.rand(4)
    a, b = net(x=x, t=t, y=torch.zeros(4, dtype=torch.long)), net(x=x, t=t, y=torch.ones(4, dtype=torch.long))
    assert not torch.allclose(a, b)
    assert torch.equal(net(x=x, t=t), net(x=x, t=t, y=torch.full((4,), 10, dtype=torch.long)))
    field = DiTField(net, schedule=None)
    assert torch.equal(field(x, t, y=torch.zeros(4, dtype=torch.long)), a)


@pytest.mark.parametrize("family", ["rf", "edm", "ddpm"])
def test_each_family_loss_falls_with_training(family, trained):
    cfg = TeacherConfig(family=family, steps=60, **TINY)

    data = load_digits_images(8, split="val")
    batch = (data.x[:256], data.y[:256])

    @torch.no_grad()
    def mean_loss(net):
        return sum(float(teacher_loss(cfg, net, batch, torch.Generator().manual_seed(s))) for s in range(8)) / 8

    torch.manual_seed(cfg.seed)
    fresh = DigitsTeacher(cfg).net
    assert mean_loss(trained[family].net) < 0.9 * mean_loss(fresh)


def test_rf_teacher_same_endpoint_in_either_family(trained):
    """The rf teacher through the EDM Heun sampler in sigma and through Heun in rectified-flow time, both from the
    same noise at sigma_max = 80 (t = 1/81): the endpoints agree as the grids are refined (second order)."""
    teacher, labels = trained["rf"], torch.arange(16) % 10

    def gap(steps):
        g = torch.Generator().manual_seed(0)
        in_sigma = teacher.sample(labels, steps=steps, sampler="edm", generator=g)
        # The EDM sampler starts at sigma_max: run Heun in t from the same point on the mapped Karras grid.
        noise = torch.randn((16, 1, 8, 8), generator=torch.Generator().manual_seed(0))
        sigmas = torch.cat([EDM(sigma_max=80.0)(uniform(steps - 1, dtype=torch.float64)).sigma, torch.zeros(1)])
        times = rf_time(sigmas).float()
        with torch.no_grad():
            in_t = solve_ode(teacher.velocity(), times[0] * 80 * noise, times, method="heun", y=labels)
        return float((in_sigma - in_t).abs().max())

    coarse, fine = gap(8), gap(64)
    assert fine < 2e-3 and fine < coarse / 10, (coarse, fine)


def test_edm_teacher_on_euler_in_t_matches_euler_in_sigma(trained):
    """Euler in t and Euler in sigma are the same DDIM step: the edm teacher's samples agree to float rounding."""
    teacher, labels = trained["edm"], torch.arange(8) % 10
    in_t = teacher.sample(labels, steps=6, sampler="euler", generator=torch.Generator().manual_seed(1))
    noise = torch.randn((8, 1, 8, 8), generator=torch.Generator().manual_seed(1))

    denoiser = teacher.denoiser()
    t0 = 1 / 81
    sigmas = rf_sigma(uniform(6, start=t0, dtype=torch.float64)).float()
    x = 80 * noise
    with torch.no_grad():
        for s, s_next in itertools.pairwise(sigmas):
            level = torch.full((8,), float(s)).clamp_min(0.002)
            x = x + (s_next - s) * (x - denoiser(x=x, sigma=level, y=labels)) / level
    assert torch.allclose(in_t, x, atol=1e-4)


@pytest.mark.parametrize("family", ["rf", "edm", "ddpm"])
def test_guidance_one_is_the_conditional_model_and_guidance_moves_samples(family, trained):
    teacher, labels = trained[family], torch.arange(10)
    plain = teacher.sample(labels, steps=4, generator=torch.Generator().manual_seed(0))
    same = teacher.sample(labels, steps=4, guidance=1.0, generator=torch.Generator().manual_seed(0))
    guided = teacher.sample(labels, steps=4, guidance=3.0, generator=torch.Generator().manual_seed(0))
    assert torch.equal(plain, same) and not torch.allclose(plain, guided)
    assert plain.shape == (10, 1, 8, 8) and bool(torch.isfinite(plain).all())


def test_teacher_artifact_is_built_once(tmp_path, monkeypatch):
    monkeypatch.setenv("FLOWLAB_CACHE", str(tmp_path))
    cfg = TeacherConfig(family="rf", steps=3, **TINY)
    a = digits_teacher(cfg)
    b = digits_teacher(cfg)
    assert len([e for e in entries() if e["name"] == "vision.digits_teacher"]) == 1
    for (ka, va), (kb, vb) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
        assert ka == kb and torch.equal(va, vb)
    assert not any(p.requires_grad for p in a.parameters())


@pytest.mark.parametrize("family", ["rf", "edm", "ddpm"])
def test_16x16_teachers_of_the_full_variant_train_and_sample(family):
    teacher = train_teacher(TeacherConfig(family=family, size=16, steps=2, **TINY))
    x = teacher.sample(torch.arange(3), steps=2, generator=torch.Generator().manual_seed(0))
    assert x.shape == (3, 1, 16, 16) and bool(torch.isfinite(x).all())


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: TeacherConfig(family="gan"), "family: expected one of"),
        (lambda: TeacherConfig(size=12), "size: expected 8, 16 or 32"),
        (lambda: TeacherConfig(class_dropout=1.0), "class_dropout: expected a probability"),
        (lambda: TeacherConfig(device="tpu"), "device: expected a device type"),
        (lambda: TeacherConfig(steps="many"), "steps"),
    ],
)
def test_bad_config(call, message):
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"labels": torch.tensor([0, 11])}, r"y: expected labels in \[0, 9\]"),
        ({"labels": torch.tensor([0.0, 1.0])}, "y: expected int64 class labels"),
        ({"labels": [0, 1]}, "labels: expected a tensor"),
        ({"sampler": "dpmpp_2m"}, "sampler: expected one of"),
        ({"steps": 0}, "steps: expected a positive int"),
        ({"steps": 1, "sampler": "edm"}, "steps: the EDM sampler needs at least 2 steps"),
    ],
)
def test_bad_sample_input(kwargs, message, trained):
    args = {"labels": torch.arange(2), "steps": 2, "generator": torch.Generator().manual_seed(0)} | kwargs
    with pytest.raises(ValueError, match=message):
        trained["rf"].sample(**args)


def test_family_specific_views_are_refused():
    teacher = DigitsTeacher(TeacherConfig(family="ddpm", **TINY))
    with pytest.raises(ValueError, match="family: velocity needs a teacher of family rf or edm"):
        teacher.velocity()
    with pytest.raises(ValueError, match="family: denoiser needs a teacher of family edm"):
        DigitsTeacher(TeacherConfig(family="rf", **TINY)).denoiser()


def test_given_noise_is_the_generators_noise_and_exactly_one_is_asked_for(trained):
    teacher, labels = trained["rf"], torch.arange(8) % 10
    drawn = teacher.sample(labels, steps=4, sampler="euler", generator=torch.Generator().manual_seed(1))
    noise = torch.randn((8, 1, 8, 8), generator=torch.Generator().manual_seed(1))
    assert torch.equal(teacher.sample(labels, steps=4, sampler="euler", noise=noise), drawn)
    with pytest.raises(ValueError, match="generator, noise"):
        teacher.sample(labels, steps=4)
    with pytest.raises(ValueError, match="noise"):
        teacher.sample(labels, steps=4, noise=noise[:, :, :4])
