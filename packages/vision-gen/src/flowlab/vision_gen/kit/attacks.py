"""Attack kit: image transforms mapping (B, C, H, W) images in [0, 1] to the same shape, registered by name.

Random attacks take `generator=`; `compose(*attacks)` applies several in order; a suite is a list of specs
"name" or "name@strength" (e.g. "jpeg@25"), each strength checked against its attack's range (`STRENGTHS`);
`apply_suite(images, suite, generator=)` returns name -> images. `suite="small"` holds the strengths rescaled for
8-32 px images.

Beyond the registered transforms: `straight_through(attack)` makes any attack usable in training (its output
forward, the identity's gradient backward: straight-through JPEG); `average_residual` / `remove_residual` /
`forge` are the averaging attack on k watermarked images of one key and its forgery; `regenerate` noises images
and re-denoises them with an epsilon-prediction diffusion model; `pgd` pushes images up a loss (e.g. a watermark
extractor's) inside an L-infinity ball, and `inversion_pgd` is it against the noise a model's inversion recovers.
`resolve_attack` reads an evaluation table's spec ("clean", a registered attack, or "regenerate@strength" and
"pgd@eps" with their model).
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F

from flowlab.vision_gen.kit.sampling import invert_to_noise

__all__ = [
    "ATTACKS",
    "SMALL_SUITE",
    "STRENGTHS",
    "apply_suite",
    "average_residual",
    "compose",
    "forge",
    "inversion_pgd",
    "parse_attack",
    "pgd",
    "regenerate",
    "remove_residual",
    "resolve_attack",
    "straight_through",
]


def gaussian_noise(x, std: float = 0.05, *, generator=None):
    return (x + std * torch.randn(x.shape, generator=generator, dtype=x.dtype).to(x.device)).clamp(0, 1)


def brightness(x, factor: float = 1.5, *, generator=None):
    return (x * factor).clamp(0, 1)


def contrast(x, factor: float = 0.5, *, generator=None):
    mean = x.mean(dim=(-3, -2, -1), keepdim=True)
    return (mean + factor * (x - mean)).clamp(0, 1)


def gaussian_blur(x, sigma: float = 1.0, *, generator=None):
    k = torch.arange(-1, 2, dtype=x.dtype, device=x.device)
    w = torch.exp(-(k**2) / (2 * sigma**2))
    w = w / w.sum()
    c = x.shape[1]
    h = F.conv2d(F.pad(x, (1, 1, 0, 0), mode="replicate"), w.view(1, 1, 1, 3).expand(c, 1, 1, 3), groups=c)
    return F.conv2d(F.pad(h, (0, 0, 1, 1), mode="replicate"), w.view(1, 1, 3, 1).expand(c, 1, 3, 1), groups=c)


def median_filter(x, k: int = 3, *, generator=None):
    k = int(k)
    p = k // 2
    patches = F.unfold(F.pad(x, (p, p, p, p), mode="replicate"), k)  # (B, C*k*k, H*W)
    b, c, h, w = x.shape
    return patches.view(b, c, k * k, h * w).median(dim=2).values.view(b, c, h, w)


def jpeg(x, quality: float = 25, *, generator=None):
    from PIL import Image

    out = []
    arr = (x.clamp(0, 1) * 255).round().to(torch.uint8).cpu().numpy()
    for img in arr:
        pil = Image.fromarray(img[0] if img.shape[0] == 1 else np.transpose(img, (1, 2, 0)))
        buf = io.BytesIO()
        pil.save(buf, format="JPEG", quality=int(quality))
        dec = np.asarray(Image.open(io.BytesIO(buf.getvalue())))
        out.append(dec[None] if dec.ndim == 2 else np.transpose(dec, (2, 0, 1)))
    return torch.as_tensor(np.stack(out), dtype=x.dtype, device=x.device) / 255.0


def resize(x, scale: float = 0.5, *, generator=None):
    h, w = x.shape[-2:]
    small = F.interpolate(
        x,
        size=(max(1, round(h * scale)), max(1, round(w * scale))),
        mode="bilinear",
        align_corners=False,
        antialias=True,
    )
    return F.interpolate(small, size=(h, w), mode="bilinear", align_corners=False).clamp(0, 1)


def random_crop(x, keep: float = 0.6, *, generator=None):
    """Keep a random window of `keep` of the area, the rest set to zero (pad back)."""
    b, _, h, w = x.shape
    ch, cw = max(1, round(h * keep**0.5)), max(1, round(w * keep**0.5))
    out = torch.zeros_like(x)
    ys = torch.randint(0, h - ch + 1, (b,), generator=generator)
    xs = torch.randint(0, w - cw + 1, (b,), generator=generator)
    for i in range(b):
        y0, x0 = int(ys[i]), int(xs[i])
        out[i, :, y0 : y0 + ch, x0 : x0 + cw] = x[i, :, y0 : y0 + ch, x0 : x0 + cw]
    return out


def rotate(x, degrees: float = 15.0, *, generator=None):
    """Rotate by `degrees` (counter-clockwise) about the centre, bilinear, the corners filled with zero."""
    if degrees % 360 == 0:
        return x.clamp(0, 1)
    b, _, h, w = x.shape
    a = math.radians(degrees)
    cos, sin = math.cos(a), math.sin(a)
    # the pixel-space rotation in affine_grid's coordinates, which run over [-1, 1] along each side
    theta = x.new_tensor([[cos, -sin * h / w, 0.0], [sin * w / h, cos, 0.0]]).expand(b, 2, 3)
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)
    return F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False).clamp(0, 1)


ATTACKS: dict[str, tuple[Callable, float]] = {
    "gaussian_noise": (gaussian_noise, 0.05),
    "brightness": (brightness, 1.5),
    "contrast": (contrast, 0.5),
    "gaussian_blur": (gaussian_blur, 1.0),
    "median_filter": (median_filter, 3),
    "jpeg": (jpeg, 25),
    "resize": (resize, 0.5),
    "random_crop": (random_crop, 0.6),
    "rotate": (rotate, 15.0),
}

#: each attack's strengths: (a check of the value, what it expects)
STRENGTHS: dict[str, tuple[Callable[[float], bool], str]] = {
    "gaussian_noise": (lambda v: v >= 0, "a noise std >= 0"),
    "brightness": (lambda v: v >= 0, "a factor >= 0"),
    "contrast": (lambda v: v >= 0, "a factor >= 0"),
    "gaussian_blur": (lambda v: v > 0, "a sigma > 0"),
    "median_filter": (lambda v: v >= 1 and v == int(v) and int(v) % 2 == 1, "an odd window size >= 1"),
    "jpeg": (lambda v: 1 <= v <= 100, "a JPEG quality in [1, 100]"),
    "resize": (lambda v: 0 < v <= 1, "a scale in (0, 1]"),
    "random_crop": (lambda v: 0 < v <= 1, "a kept fraction of the area in (0, 1]"),
    "rotate": (lambda v: True, "an angle in degrees"),
}

SMALL_SUITE = (
    "gaussian_noise@0.05",
    "brightness@1.5",
    "contrast@0.5",
    "gaussian_blur@1.0",
    "median_filter@3",
    "jpeg@25",
    "jpeg@50",
    "jpeg@75",
    "resize@0.5",
    "random_crop@0.6",
)


def parse_attack(spec: str) -> Callable[..., torch.Tensor]:
    """ "name" or "name@strength" -> attack(x, *, generator=None)."""
    name, _, value = spec.partition("@")
    if name not in ATTACKS:
        raise ValueError(f"attack: unknown attack {name!r}; known: {sorted(ATTACKS)}")
    fn, default = ATTACKS[name]
    try:
        strength = float(value) if value else default
    except ValueError as err:
        raise ValueError(f"strength: expected a number after '@' in {spec!r}") from err
    valid, expected = STRENGTHS[name]
    if not (math.isfinite(strength) and valid(strength)):
        raise ValueError(f"strength: {name} expects {expected}, got {strength:g}")

    def attack(x: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
        return fn(x, strength, generator=generator)

    attack.__name__ = spec
    return attack


def resolve_attack(
    spec: str, *, denoiser: torch.nn.Module | None = None, data_range: float = 1.0
) -> Callable[..., torch.Tensor]:
    """A spec of an evaluation table -> attack(x, *, generator=None) on (B, C, H, W) images in [0, 1]: "clean" (the
    identity), "regenerate@strength" (`regenerate` with `denoiser`, whose training images span [-data_range,
    data_range]), "pgd@eps" (`inversion_pgd` on `denoiser`: the PGD row of initial-noise watermarks; a scheme with
    its own extractor, such as MOLM, runs `pgd` on it instead) or any registered attack (`parse_attack`)."""
    name, _, value = spec.partition("@")
    if spec == "clean":
        return lambda x, *, generator=None: x
    if name not in ("regenerate", "pgd"):
        return parse_attack(spec)
    if denoiser is None:
        raise ValueError(f"denoiser: the {name} attack needs a digits diffusion model")
    try:
        strength = float(value)
    except ValueError as err:
        raise ValueError(f"strength: expected a number after '@' in {spec!r}") from err
    if not 0 < strength < 1:
        what = "an L-infinity radius" if name == "pgd" else "a noise level"
        raise ValueError(f"strength: {name} expects {what} in (0, 1), got {value!r}")

    def attack(x: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
        if name == "pgd":
            return inversion_pgd(x, denoiser, eps=strength, data_range=data_range)
        return regenerate(x, denoiser, strength, data_range=data_range, generator=generator)

    attack.__name__ = spec
    return attack


def compose(*attacks: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """Apply attacks in order."""

    def composed(x: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
        for a in attacks:
            x = a(x, generator=generator)
        return x

    return composed


def apply_suite(
    images: torch.Tensor, suite: str | tuple[str, ...] = "small", *, generator: torch.Generator | None = None
) -> dict[str, torch.Tensor]:
    """name -> attacked images for every spec of the suite ("small" = SMALL_SUITE); images (B, C, H, W) in [0, 1]."""
    specs = SMALL_SUITE if suite == "small" else tuple(suite)
    return {spec: parse_attack(spec)(images, generator=generator) for spec in specs}


def straight_through(attack: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """`attack` for training: forward its output, backward the identity's gradient (x + (attack(x) - x).detach())."""

    def through(x: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
        with torch.no_grad():
            attacked = attack(x.detach(), generator=generator)
        return x + (attacked - x.detach())

    through.__name__ = f"straight_through({getattr(attack, '__name__', 'attack')})"
    return through


def _check_images(x: object, name: str) -> torch.Tensor:
    if not isinstance(x, torch.Tensor) or x.dim() != 4 or x.shape[0] < 1 or not x.is_floating_point():
        raise ValueError(f"{name}: expected a floating (k, C, H, W) tensor with k >= 1")
    if not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name}: expected finite values")
    return x


def average_residual(watermarked: torch.Tensor, clean: torch.Tensor | None = None) -> torch.Tensor:
    """The averaging attack's estimate of a key's watermark: mean of k watermarked images (k, C, H, W) of one key,
    minus the mean of clean images (k', C, H, W) when given -> (1, C, H, W). With one image and no clean set it is
    that image."""
    mean = _check_images(watermarked, "watermarked").mean(0, keepdim=True)
    if clean is None:
        return mean
    clean = _check_images(clean, "clean")
    if clean.shape[1:] != watermarked.shape[1:]:
        raise ValueError(f"clean: expected images of shape {tuple(watermarked.shape[1:])}, got {tuple(clean.shape)}")
    return mean - clean.mean(0, keepdim=True)


def remove_residual(x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    """Images (B, C, H, W) in [0, 1] with an estimated watermark residual (1, C, H, W) subtracted, clamped."""
    return (x - residual).clamp(0, 1)


def forge(x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    """Clean images (B, C, H, W) in [0, 1] with an estimated watermark residual (1, C, H, W) added, clamped: a
    forgery attempt."""
    return (x + residual).clamp(0, 1)


def regenerate(
    x: torch.Tensor,
    denoiser: torch.nn.Module,
    strength: float = 0.3,
    *,
    data_range: float = 1.0,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Regeneration attack: images (B, C, H, W) in [0, 1], mapped to [-data_range, data_range], noised to core time
    t = 1 - strength of `denoiser.schedule` (alpha_t x + sigma_t eps) and denoised in one Tweedie step with the
    epsilon-prediction `denoiser(x_t, t)`; returned in [0, 1]."""
    if not 0 < strength < 1:
        raise ValueError(f"strength: expected a noise level in (0, 1), got {strength!r}")
    x0 = (2 * x - 1) * data_range
    t = torch.full((x.shape[0],), 1.0 - strength, dtype=torch.float64, device=x.device)
    coef = denoiser.schedule(t)
    alpha, sigma = (c.to(x.dtype).view(-1, 1, 1, 1) for c in (coef.alpha, coef.sigma))
    eps = torch.randn(x.shape, generator=generator, dtype=x.dtype).to(x.device)
    xt = alpha * x0 + sigma * eps
    with torch.no_grad():
        x0_hat = (xt - sigma * denoiser(xt, t.to(x.dtype))) / alpha
    return ((x0_hat / data_range + 1) / 2).clamp(0, 1)


def inversion_pgd(
    x: torch.Tensor,
    denoiser: torch.nn.Module,
    *,
    eps: float = 0.03,
    steps: int = 10,
    inversion_steps: int = 10,
    data_range: float = 1.0,
) -> torch.Tensor:
    """PGD on the extractor of initial-noise watermarks (Gaussian Shading, Spherical, Tree-Ring), knowing the model
    but not the key: `steps` signed-gradient steps (`pgd`) that push the noise an `inversion_steps`-step naive DDIM
    inversion of `denoiser` recovers from the images against the signs it recovers from x, i.e. ascend
    −mean(sign(n(x)) · n(x_adv)). x: (B, C, H, W) in [0, 1], mapped to [−data_range, data_range] for the model. The
    short inversion is the attacker's cheaper surrogate for the detector's own (a transfer attack)."""

    def noise(images: torch.Tensor, differentiable: bool) -> torch.Tensor:
        model_space = (2 * images - 1) * data_range
        return invert_to_noise(denoiser, model_space, steps=inversion_steps, differentiable=differentiable)

    reference = noise(x, False).sign()
    return pgd(x, lambda adv: -(reference * noise(adv, True)).mean(), eps=eps, steps=steps)


def pgd(
    x: torch.Tensor,
    loss: Callable[[torch.Tensor], torch.Tensor],
    *,
    eps: float = 0.03,
    steps: int = 10,
    step_size: float | None = None,
) -> torch.Tensor:
    """Projected gradient ascent on `loss(images) -> scalar` from images x (B, C, H, W) in [0, 1], each step a
    signed-gradient move of `step_size` (default 2.5 eps / steps) projected onto the L-infinity ball of radius
    `eps` around x and onto [0, 1]. Gradients are on inside, whatever the caller's grad mode."""
    if not (eps >= 0 and math.isfinite(eps)):
        raise ValueError(f"eps: expected a finite radius >= 0, got {eps!r}")
    if not (isinstance(steps, int) and steps >= 1):
        raise ValueError(f"steps: expected a positive int, got {steps!r}")
    size = 2.5 * eps / steps if step_size is None else step_size
    x = x.detach()
    adv = x.clone()
    for _ in range(steps):
        adv.requires_grad_(True)
        with torch.enable_grad():
            (grad,) = torch.autograd.grad(loss(adv), adv)
        adv = (adv.detach() + size * grad.sign()).clamp(x - eps, x + eps).clamp(0, 1)
    return adv.detach()
