"""The vision kit's 3D pieces: pinhole cameras (checked on construction, orbit cameras, rays, Plücker coordinates),
the pure-torch Gaussian-splatting renderer (against the analytic projection of one Gaussian, depth order,
gradcheck; against gsplat where it is installed on CUDA), the Gaussian fit behind the consistency metric, and the
high-frequency energy."""

from __future__ import annotations

import math

import pytest
import torch

from flowlab.core.testing import available_devices
from flowlab.vision_gen.kit.cameras import Cameras, orbit_cameras, pixel_rays, plucker
from flowlab.vision_gen.kit.gaussian_fit import fit_gaussians, render_views
from flowlab.vision_gen.kit.sharpness import high_frequency_energy
from flowlab.vision_gen.kit.splatting import Gaussians, gsplat_available, quaternion_matrix, render_gaussians

pytestmark = pytest.mark.usefixtures("one_thread")


def _axis_camera(focal: float, size: int, dtype=torch.float32) -> Cameras:
    """A camera at the world origin looking along +z (R = I, t = 0)."""
    K = torch.tensor([[[focal, 0, size / 2], [0, focal, size / 2], [0, 0, 1]]], dtype=dtype)
    return Cameras(K, torch.eye(3, dtype=dtype)[None], torch.zeros(1, 3, dtype=dtype))


def _one(mean, scale, opacity=0.8, color=(1.0, 0.5, 0.25), dtype=torch.float32) -> Gaussians:
    return Gaussians(torch.tensor([[mean]], dtype=dtype), torch.full((1, 1, 3), scale, dtype=dtype),
                     torch.tensor([[opacity]], dtype=dtype), torch.tensor([[color]], dtype=dtype))  # fmt: skip


def test_single_gaussian_on_the_axis_matches_its_analytic_projection():
    # an isotropic Gaussian of std s at depth d on the optical axis projects to a 2D Gaussian of std f s / d at the
    # principal point: the image is o exp(-r^2 / 2 sigma^2) c on a black background
    f, size, s, d, o = 10.0, 15, 0.4, 3.0, 0.8
    out = render_gaussians(_one([0.0, 0.0, d], s, o), _axis_camera(f, size), size=size, blur=0.0)
    centres = torch.arange(size) + 0.5
    r2 = (centres[:, None] - size / 2) ** 2 + (centres[None] - size / 2) ** 2
    expected = o * torch.exp(-r2 / (2 * (f * s / d) ** 2))
    assert torch.allclose(out.alpha[0, 0], expected, atol=1e-5)
    assert torch.allclose(out.image[0], expected * torch.tensor([1.0, 0.5, 0.25])[:, None, None], atol=1e-5)
    assert torch.allclose(out.depth[0, 0], d * expected, atol=1e-4)


def test_off_axis_gaussian_lands_at_K_x_over_d():
    f, size = 12.0, 24
    mean = torch.tensor([0.4, -0.3, 3.0])
    out = render_gaussians(_one(mean.tolist(), 0.3, 0.5), _axis_camera(f, size), size=size, blur=0.0)
    w = out.alpha[0, 0]
    centres = torch.arange(size) + 0.5
    centroid = torch.stack(((w.sum(0) * centres).sum(), (w.sum(1) * centres).sum())) / w.sum()
    assert torch.allclose(centroid, f * mean[:2] / mean[2] + size / 2, atol=0.05)


def test_compositing_respects_depth_not_input_order():
    cam = _axis_camera(10.0, 9)
    red = ([0.0, 0.0, 2.0], (1.0, 0.0, 0.0))
    blue = ([0.0, 0.0, 4.0], (0.0, 0.0, 1.0))

    def scene(first, second):
        return Gaussians(torch.tensor([[first[0], second[0]]]), torch.full((1, 2, 3), 0.3),
                         torch.full((1, 2), 0.9), torch.tensor([[first[1], second[1]]]))  # fmt: skip

    a, b = (render_gaussians(scene(x, y), cam, size=9).image for x, y in ((red, blue), (blue, red)))
    assert torch.allclose(a, b, atol=1e-6)
    centre = a[0, :, 4, 4]  # the near red one covers the far blue one: 0.9 red, 0.1 * 0.9 blue
    assert centre[0] == pytest.approx(0.9, abs=1e-3) and centre[2] == pytest.approx(0.09, abs=1e-3)


def test_renderer_gradcheck_float64():
    cam = _axis_camera(4.0, 3, torch.float64)
    means = torch.tensor([[[0.1, -0.05, 2.0], [-0.1, 0.1, 2.6]]], dtype=torch.float64, requires_grad=True)
    scales = torch.tensor([[[0.3, 0.25, 0.2], [0.35, 0.3, 0.4]]], dtype=torch.float64, requires_grad=True)
    quats = torch.tensor([[[1.0, 0.1, -0.2, 0.05], [0.9, 0.0, 0.3, 0.1]]], dtype=torch.float64, requires_grad=True)
    opacities = torch.tensor([[0.5, 0.6]], dtype=torch.float64, requires_grad=True)
    colors = torch.tensor([[[0.2, 0.7, 0.1], [0.9, 0.3, 0.5]]], dtype=torch.float64, requires_grad=True)

    def image(m, s, q, o, c):
        return render_gaussians(Gaussians(m, s, o, c, q), cam, size=3, background=0.2).image

    assert torch.autograd.gradcheck(image, (means, scales, quats, opacities, colors))


def test_rotation_turns_an_anisotropic_gaussian():
    # a Gaussian elongated along x, turned 90 degrees about the optical axis, is elongated along y
    cam = _axis_camera(10.0, 16)
    g = Gaussians(torch.tensor([[[0.0, 0.0, 3.0]]]), torch.tensor([[[0.6, 0.1, 0.1]]]), torch.tensor([[0.9]]),
                  torch.ones(1, 1, 1))  # fmt: skip
    turn = math.sqrt(0.5)
    q = torch.tensor([[[turn, 0.0, 0.0, turn]]])
    assert torch.allclose(quaternion_matrix(q)[0, 0] @ torch.tensor([1.0, 0, 0]), torch.tensor([0.0, 1, 0]), atol=1e-6)
    flat = render_gaussians(g, cam, size=16).alpha[0, 0]
    turned = render_gaussians(Gaussians(g.means, g.scales, g.opacities, g.colors, q), cam, size=16).alpha[0, 0]
    assert torch.allclose(turned, flat.T, atol=1e-5) and not torch.allclose(turned, flat, atol=1e-2)


def test_orbit_cameras_look_at_the_origin_and_rays_hit_their_depth():
    cams = orbit_cameras(torch.tensor([0.0, 70.0, 200.0]), radius=2.5, elevation=25.0, focal=11.0, size=8)
    uv = cams.project(torch.zeros(3, 1, 3))
    assert torch.allclose(uv, torch.full_like(uv, 4.0), atol=1e-5)
    assert torch.allclose(cams.centers.norm(dim=-1), torch.full((3,), 2.5))
    rays = pixel_rays(cams, 8)
    z = torch.tensor([1.5, 2.0, 3.7])[:, None, None]
    points = rays.origins + z * rays.dirs
    cam_points = points @ cams.R.transpose(-1, -2) + cams.t[:, None]
    assert torch.allclose(cam_points[..., 2], z[..., 0].expand(3, 64), atol=1e-5)
    pix = torch.stack(torch.meshgrid(torch.arange(8) + 0.5, torch.arange(8) + 0.5, indexing="ij")[::-1], -1)
    assert torch.allclose(cams.project(points), pix.reshape(1, 64, 2).expand(3, 64, 2), atol=1e-4)


def test_plucker_coordinates_do_not_depend_on_the_point_on_the_ray():
    rays = pixel_rays(orbit_cameras(torch.tensor([30.0]), radius=3.0, elevation=10.0, focal=8.0, size=4), 4)
    moved = type(rays)(rays.origins + 1.7 * rays.dirs, rays.dirs)
    assert torch.allclose(plucker(rays), plucker(moved), atol=1e-5)


@pytest.mark.parametrize(
    ("change", "name"),
    [
        (lambda K, R, t: (K[..., :2], R, t), "K"),
        (lambda K, R, t: (K, R[:, :2], t), "R"),
        (lambda K, R, t: (K, R, t[:, :2]), "t"),
        (lambda K, R, t: (K, R, t.clone().fill_(float("nan"))), "t"),
        (lambda K, R, t: (K.clone().fill_(float("inf")), R, t), "K"),
        (lambda K, R, t: (K, 2 * R, t), "R"),
        (lambda K, R, t: (-K, R, t), "K"),
        (lambda K, R, t: (K, R, torch.zeros(2, 3)), "K, R, t"),
        (lambda K, R, t: (K.long(), R, t), "K"),
    ],
)
def test_bad_cameras_raise_errors_naming_the_matrix(change, name):
    cam = _axis_camera(5.0, 4)
    with pytest.raises(ValueError, match=rf"^{name}: "):
        Cameras(*change(cam.K, cam.R, cam.t))


def test_render_rejects_mismatched_cameras_and_gaussians():
    g = _one([0.0, 0.0, 2.0], 0.2)
    with pytest.raises(ValueError, match=r"^cameras: "):
        render_gaussians(g, _axis_camera(5.0, 4).expand(2, 1).reshape(2), size=4)
    with pytest.raises(ValueError, match=r"^opacities: "):
        Gaussians(g.means, g.scales, torch.ones(1, 2), g.colors)
    with pytest.raises(ValueError, match=r"^backend: "):
        render_gaussians(g, _axis_camera(5.0, 4), size=4, backend="optix")


@pytest.mark.skipif(not gsplat_available(), reason="gsplat with CUDA is not available")
def test_gsplat_agrees_with_the_torch_renderer():
    gen = torch.Generator().manual_seed(0)
    cams = orbit_cameras(torch.tensor([0.0, 90.0]), radius=2.5, elevation=20.0, focal=22.0, size=16).to("cuda")
    means = (torch.rand(2, 5, 3, generator=gen) - 0.5) * 0.8
    scales = 0.1 + 0.2 * torch.rand(2, 5, 3, generator=gen)
    opacities = 0.5 + 0.4 * torch.rand(2, 5, generator=gen)
    g = Gaussians(means, scales, opacities, torch.rand(2, 5, 3, generator=gen)).to("cuda")
    ours = render_gaussians(g, cams, size=16, backend="torch")
    theirs = render_gaussians(g, cams, size=16, backend="gsplat")
    assert (ours.image - theirs.image).abs().max() < 0.02
    assert (ours.alpha - theirs.alpha).abs().max() < 0.02


def _scenes(n: int, m: int, seed: int) -> Gaussians:
    gen = torch.Generator().manual_seed(seed)
    return Gaussians((torch.rand(n, m, 3, generator=gen) - 0.5) * 0.8, (0.15 + 0.15 * torch.rand(n, m, 1,
                     generator=gen)).expand(n, m, 3), 0.7 + 0.3 * torch.rand(n, m, generator=gen),
                     torch.rand(n, m, 3, generator=gen))  # fmt: skip


def test_gaussian_fit_explains_the_views_of_one_scene_but_not_of_mixed_scenes():
    cams = orbit_cameras(torch.arange(4) * 90.0, radius=2.5, elevation=20.0, focal=11.2, size=8)
    views = render_views(_scenes(8, 3, 0), cams, size=8)
    mixed = views.clone()
    mixed[:, 1:] = views.roll(1, dims=0)[:, 1:]  # view 0 from one scene, the others from another
    fit = lambda v: fit_gaussians(v, cams, n_gaussians=6, steps=150, generator=torch.Generator().manual_seed(1))  # noqa: E731
    same, other = fit(views).residual, fit(mixed).residual
    assert same.mean() < 2e-3 and other.mean() > 3 * same.mean()
    with pytest.raises(ValueError, match=r"^views: "):
        fit_gaussians(views[0], cams, n_gaussians=2, generator=torch.Generator())
    with pytest.raises(ValueError, match=r"^cameras: "):
        fit_gaussians(views, _axis_camera(5.0, 8), n_gaussians=2, generator=torch.Generator())


def test_high_frequency_energy_is_zero_when_flat_and_drops_with_blur():
    x = torch.rand(4, 3, 16, 16, generator=torch.Generator().manual_seed(0))
    flat = torch.full((2, 3, 16, 16), 0.7)
    blurred = torch.nn.functional.avg_pool2d(x, 3, stride=1, padding=1, count_include_pad=False)
    assert torch.allclose(high_frequency_energy(flat), torch.zeros(2), atol=1e-10)
    assert (high_frequency_energy(blurred) < 0.5 * high_frequency_energy(x)).all()
    with pytest.raises(ValueError, match=r"^cutoff: "):
        high_frequency_energy(x, cutoff=0.9)


@pytest.mark.parametrize("device", available_devices(), ids=str)
def test_renderer_runs_on_every_device_and_matches_the_cpu(device):
    cams = orbit_cameras(torch.tensor([0.0, 90.0]), radius=2.5, elevation=20.0, focal=11.0, size=8)
    g = _scenes(2, 3, 4)
    cpu = render_gaussians(g, cams, size=8).image
    here = render_gaussians(g.to(device), cams.to(device), size=8).image
    assert here.device.type == device.type and torch.allclose(here.cpu(), cpu, atol=1e-5)


def test_gaussian_fit_returns_detached_gaussians():
    cams = orbit_cameras(torch.arange(2) * 180.0, radius=2.5, elevation=20.0, focal=11.2, size=8)
    fit = fit_gaussians(render_views(_scenes(2, 2, 1), cams, size=8), cams, n_gaussians=2, steps=2,
                        generator=torch.Generator())  # fmt: skip
    assert not any(x.requires_grad for x in (fit.gaussians.means, fit.gaussians.scales, fit.renders, fit.residual))
