"""FlashWorld's pieces at toy size: the pixel-aligned head places Gaussians on their rays, the 3D-consistent sampler
re-noises on the MV sampler's grid and returns an oracle's renders exactly, cross-mode distillation's losses reach
the parameters they should, pre-training lowers its loss, the model folder round-trips, and the scenes artifact holds
renders of its scenes."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from flowlab.vision_gen.flashworld.distill import DistillConfig, distill_loss
from flowlab.vision_gen.flashworld.evaluate import EvalSettings, scene_metrics
from flowlab.vision_gen.flashworld.model import DualModeConfig, DualModeModel, ThreeDOutput, check_views
from flowlab.vision_gen.flashworld.objective import dual_mode_loss
from flowlab.vision_gen.flashworld.sample import sample_3d, sample_mv
from flowlab.vision_gen.flashworld.scenes import (
    RigConfig,
    SceneConfig,
    novel_cameras,
    random_scenes,
    rig_cameras,
    scene_data,
)
from flowlab.vision_gen.flashworld.store import load_model, save_model
from flowlab.vision_gen.flashworld.train import PretrainConfig, pretrain_dual_mode, rig_and_novel
from flowlab.vision_gen.kit.cameras import Rays
from flowlab.vision_gen.kit.gaussian_fit import render_views

pytestmark = pytest.mark.usefixtures("one_thread")

RIG = RigConfig(size=8, novel=2)
TINY = DualModeConfig(rig=RIG, dim=32, depth=1, heads=2, features=4)


def _model(seed: int = 0) -> DualModeModel:
    torch.manual_seed(seed)
    return DualModeModel(TINY)


def _truth(n: int, seed: int = 0) -> torch.Tensor:
    """(n, V + V_novel, 3, S, S) renders in [0, 1] of random scenes."""
    scenes = random_scenes(SceneConfig(rig=RIG), n, generator=torch.Generator().manual_seed(seed))
    return render_views(scenes, rig_and_novel(TINY), size=RIG.size)


def test_pixel_aligned_head_places_each_gaussian_on_its_ray_at_its_depth():
    model = _model()
    head, cams = model.head, rig_cameras(RIG)
    n = RIG.views * RIG.size**2
    depth = 1.5 + 2 * torch.rand(2, n, generator=torch.Generator().manual_seed(0))
    raw_depth = torch.logit((depth - head.near) / (head.far - head.near))
    zeros = torch.zeros(2, n)
    g = head.gaussians(raw_depth, zeros, zeros, torch.zeros(2, n, 3), torch.zeros(2, n, 3),
                       Rays(model.ray_origins, model.ray_dirs))  # fmt: skip
    means = g.means.reshape(2, RIG.views, RIG.size**2, 3)
    # independent truth: in each view's camera the mean sits at the pixel's centre at camera depth `depth`
    cam_points = means @ cams.R.transpose(-1, -2)[None] + cams.t[None, :, None]
    assert torch.allclose(cam_points[..., 2], depth.reshape(2, RIG.views, -1), atol=1e-4)
    centres = torch.arange(RIG.size) + 0.5
    pix = torch.stack(torch.meshgrid(centres, centres, indexing="ij")[::-1], -1).reshape(-1, 2)
    projected = cams.expand(2, RIG.views).project(means)  # (2, V, S^2, 2)
    assert torch.allclose(projected, pix.expand(2, RIG.views, -1, -1), atol=1e-4)
    # the scale is the pixel footprint at that depth times max_scale * sigmoid(0) = 1.5 pixels
    assert torch.allclose(g.scales[..., 0], 1.5 * depth / head.focal, atol=1e-5)
    assert torch.allclose(g.opacities, torch.full_like(g.opacities, 0.1))


def test_model_outputs_and_view_checks():
    model = _model()
    x, t, image = torch.randn(3, RIG.views, 3, 8, 8), torch.rand(3), torch.randn(3, 3, 8, 8)
    out = model(x, t, image)
    assert out.velocity.shape == x.shape and out.features.shape == (3, RIG.views, 4, 8, 8)
    assert torch.equal(out.velocity, torch.zeros_like(x))  # zero-initialised output layer
    pred = model.predict_3d(x, t, image)
    assert pred.renders.shape == x.shape and pred.gaussians.means.shape == (3, RIG.views * 64, 3)
    assert pred.renders.min() >= -1 and pred.renders.max() <= 1
    for bad in (x[:, :2], x[..., :4], x.double().fill_(float("nan")), x.long()):
        with pytest.raises(ValueError, match=r"^x: "):
            check_views(bad, TINY)
    with pytest.raises(ValueError, match=r"^image: "):
        sample_mv(model, image[:2], x, steps=2)
    with pytest.raises(ValueError, match=r"^noise: "):
        sample_3d(model, image, x[:, :1], steps=2, generator=torch.Generator())


class _Oracle(DualModeModel):
    """A 3D mode that always returns the true scenes (and counts its calls)."""

    def __init__(self, scenes, truth):
        super().__init__(TINY)
        self.scenes, self.truth, self.inputs = scenes, truth, []

    def predict_3d(self, x, t, image):
        self.inputs.append((x.clone(), t.clone()))
        return ThreeDOutput(self.scenes, self.truth, x)


def test_3d_sampler_with_an_oracle_returns_the_truth_and_renoises_on_the_mv_grid():
    scenes = random_scenes(SceneConfig(rig=RIG), 4, generator=torch.Generator().manual_seed(3))
    truth = 2 * render_views(scenes, rig_cameras(RIG), size=8) - 1
    oracle = _Oracle(scenes, truth)
    noise = torch.randn(truth.shape, generator=torch.Generator().manual_seed(0))
    out = sample_3d(oracle, truth[:, 0], noise, steps=4, shift=3.0, generator=torch.Generator().manual_seed(1))
    assert torch.equal(out.views, truth) and out.gaussians is scenes and len(oracle.inputs) == 4
    mv = sample_mv(_model(), truth[:, 0], noise, steps=4, shift=3.0)
    assert torch.allclose(out.times, mv.times) and torch.equal(out.states[0], noise)
    eps = out.states[1:] - out.times[1:, None, None, None, None, None] * truth
    eps = eps / (1 - out.times[1:, None, None, None, None, None])  # x_k = t_k truth + (1 - t_k) fresh noise
    assert eps.std() == pytest.approx(1.0, abs=0.1) and not torch.allclose(eps[0], noise, atol=0.5)


def test_distillation_losses_reach_the_right_parameters():
    teacher = _model()
    student, fake = _model(), _model()  # same seed: student = fake = teacher
    image = torch.randn(4, 3, 8, 8)
    noise = torch.randn(4, RIG.views, 3, 8, 8)
    with torch.no_grad():  # a non-zero MV head, so the fake score has something to learn
        for m in (teacher, student, fake):
            m.out.weight.normal_(0, 0.05, generator=torch.Generator().manual_seed(0))

    def grads(cmc_weight, mode="3d"):
        for m in (student, fake):
            m.zero_grad(set_to_none=True)
        cfg = DistillConfig(mode=mode, nfe=2, cmc_weight=cmc_weight)
        loss, logs = distill_loss(student, fake, teacher, image, noise, cfg, generator=torch.Generator().manual_seed(0))
        loss.backward()
        norm = lambda m: sum(p.grad.norm() ** 2 for p in m.parameters() if p.grad is not None) ** 0.5  # noqa: E731
        return float(norm(student)), float(norm(fake)), logs

    # fake == real: DMD's gradient (fake - real) vanishes, and the fake score's loss never reaches the student
    s, f, logs = grads(0.0)
    assert s == pytest.approx(0.0, abs=1e-10) and f > 0 and float(logs["dmd"]) == pytest.approx(0.0, abs=1e-12)
    s, f, logs = grads(1.0)
    assert s > 0 and float(logs["cmc"]) > 0
    assert all(p.grad is None or not p.grad.abs().sum() for p in teacher.parameters())
    _, _, logs = grads(1.0, mode="mv")
    assert float(logs["cmc"]) == 0.0


def test_pretraining_lowers_both_losses(tmp_path):
    views = _truth(64)
    cfg = PretrainConfig(model=TINY, scenes=SceneConfig(rig=RIG), steps=60, batch_size=16, lr=2e-3)
    cams = rig_and_novel(TINY)

    def losses(model):
        g = torch.Generator().manual_seed(5)
        with torch.no_grad():
            return [dual_mode_loss(model, views, cams, generator=g)[1] for _ in range(4)]

    before = losses(_model(0))
    model = pretrain_dual_mode(cfg, views)
    after = losses(model)
    for key in ("mv", "3d"):
        assert sum(r[key] for r in after) < 0.8 * sum(r[key] for r in before)
    save_model(tmp_path / "m", model, kind="pretrained")
    loaded, meta = load_model(tmp_path / "m")
    x, t, image = torch.randn(2, RIG.views, 3, 8, 8), torch.rand(2), torch.randn(2, 3, 8, 8)
    assert meta["kind"] == "pretrained" and torch.equal(loaded(x, t, image).velocity, model(x, t, image).velocity)
    (tmp_path / "m" / "model.safetensors").write_bytes(b"garbage")
    with pytest.raises(ValueError, match=r"^folder: "):
        load_model(tmp_path / "m")


def test_scene_artifact_and_metrics_on_the_truth(tmp_path, monkeypatch):
    monkeypatch.setenv("FLOWLAB_CACHE", str(tmp_path))
    config = SceneConfig(rig=RIG, n_train=16, n_val=4, n_test=8)
    test = scene_data(config, "test")
    assert torch.allclose(test.views, render_views(test.scenes, rig_and_novel(TINY), size=8))
    assert not torch.allclose(test.views, scene_data(config, "train").views[:8])
    with pytest.raises(ValueError, match=r"^split: "):
        scene_data(config, "dev")
    # the ground truth scores: near-zero consistency residual, sharpness 1, perfect novel views
    views = 2 * test.views[:, : RIG.views] - 1
    metrics = scene_metrics(views, test.scenes, test.views, test.views, rig_cameras(RIG), novel_cameras(RIG),
                            EvalSettings(fit_steps=150), generator=torch.Generator().manual_seed(0))  # fmt: skip
    assert metrics["consistency"] < 3e-3 and metrics["sharpness"] == pytest.approx(1.0)
    assert metrics["psnr_novel"] > 60 and metrics["fd"] < 1e-3


def test_configs_reject_bad_values():
    with pytest.raises(ValueError, match=r"^patch: "):
        DualModeConfig(rig=RIG, patch=3)
    with pytest.raises(ValueError, match=r"^mode: "):
        DistillConfig(mode="2d")
    with pytest.raises(ValueError, match=r"^model, scenes: "):
        PretrainConfig(model=TINY, scenes=SceneConfig(rig=replace(RIG, size=16)))
