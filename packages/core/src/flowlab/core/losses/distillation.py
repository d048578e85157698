"""Distribution-matching distillation pieces (DMD / DMD2, Yin et al. 2024) and the softplus (non-saturating) GAN
losses, in core time on the CondOT path x_t = t x_1 + (1 - t) eps (t = 1 data).

- `dmd_loss`: the reverse-KL generator loss. Generator samples x are re-noised to x_s at s ~ U(s_min, s_max); the
  teacher ("real") and a fake-score network, both velocity fields, predict the data there; the KL gradient with
  respect to x is (fake - real) / mean|x - real| (DMD's normaliser), applied through the surrogate
  0.5 ||x - sg(x - grad)||^2, whose gradient is exactly that.
- `fake_score_loss`: the fake-score network's update, flow matching on the generator's (detached) samples.
- `gan_generator_loss` / `gan_discriminator_loss`: softplus(-D(fake)) and softplus(-D(real)) + softplus(D(fake)).
- `gan_losses`: both at once for one optimizer over generator and discriminator: the generator term sees a frozen
  copy of the discriminator's parameters, the discriminator term a detached fake.

Fields are called `field(x=x_t, t=t, **cond)` and return velocities (B, ...).
"""

from __future__ import annotations

from typing import Any

import torch

from flowlab.core.losses.flow_matching import check_prediction, flow_matching_loss
from flowlab.core.paths.affine import AffinePath
from flowlab.core.schedules import CondOT
from flowlab.core.validation import check_tensor, expand_like

__all__ = [
    "dmd_gradient",
    "dmd_loss",
    "fake_score_loss",
    "gan_discriminator_loss",
    "gan_generator_loss",
    "gan_losses",
]


def _check_window(s_min: float, s_max: float) -> None:
    if not 0.0 <= s_min < s_max < 1.0:
        raise ValueError(f"s_min, s_max: expected 0 <= s_min < s_max < 1 (re-noising times), got {s_min}, {s_max}")


def _noised(x: torch.Tensor, s_min: float, s_max: float, generator: torch.Generator | None):
    batch = x.shape[0]
    device = generator.device if generator is not None else x.device
    s = torch.rand(batch, generator=generator, device=device).to(x) * (s_max - s_min) + s_min
    eps = torch.randn(x.shape, generator=generator, device=device).to(x)
    return AffinePath(CondOT()).sample(eps, x, s)


def dmd_gradient(x: torch.Tensor, real: torch.Tensor, fake: torch.Tensor) -> torch.Tensor:
    """DMD's normalised KL gradient (fake - real) / mean_per_sample|x - real|: all (B, ...) -> (B, ...).

    `real` and `fake` are the teacher's and the fake network's data predictions at the re-noised samples."""
    check_tensor(x, "x")
    check_prediction(real, x, "real")
    check_prediction(fake, x, "fake")
    scale = (x - real).abs().flatten(1).mean(dim=1).clamp_min(1e-8)
    return (fake - real) / expand_like(scale, x)


def dmd_loss(
    x: torch.Tensor,
    teacher: Any,
    fake: Any,
    *,
    s_min: float = 0.02,
    s_max: float = 0.98,
    generator: torch.Generator | None = None,
    **cond: Any,
) -> torch.Tensor:
    """The DMD generator loss of samples x: (B, ...) (with grad to the generator) -> scalar.

    Teacher and fake field see the same re-noised x_s (no grad to either); their data predictions x_s + (1 - s) v
    give `dmd_gradient`, and the loss 0.5 mean (x - sg(x - grad))^2 has gradient grad / x.numel() in x.
    """
    check_tensor(x, "x")
    _check_window(s_min, s_max)
    noised = _noised(x.detach(), s_min, s_max, generator)
    with torch.no_grad():
        one_minus = expand_like(1 - noised.t, x)
        real = noised.x_t + one_minus * teacher(x=noised.x_t, t=noised.t, **cond)
        fake_pred = noised.x_t + one_minus * fake(x=noised.x_t, t=noised.t, **cond)
        target = x.detach() - dmd_gradient(x.detach(), real, fake_pred)
    return 0.5 * (x - target).pow(2).mean()


def fake_score_loss(
    fake: Any,
    samples: torch.Tensor,
    *,
    generator: torch.Generator | None = None,
    **cond: Any,
) -> torch.Tensor:
    """Flow matching of the fake-score field on the generator's samples (detached here): (B, ...) -> scalar,
    the per-sample squared error averaged over elements."""
    check_tensor(samples, "samples")
    path = _noised(samples.detach(), 0.0, 1.0 - 1e-6, generator)
    prediction = fake(x=path.x_t, t=path.t, **cond)
    return flow_matching_loss(prediction, path) / samples[0].numel()


def gan_generator_loss(fake_logits: torch.Tensor) -> torch.Tensor:
    """Non-saturating generator loss mean softplus(-D(fake)): logits (B, ...) -> scalar."""
    check_tensor(fake_logits, "fake_logits")
    return torch.nn.functional.softplus(-fake_logits).mean()


def gan_discriminator_loss(real_logits: torch.Tensor, fake_logits: torch.Tensor) -> torch.Tensor:
    """mean softplus(-D(real)) + mean softplus(D(fake)): logits (B, ...) each -> scalar."""
    check_tensor(real_logits, "real_logits")
    check_tensor(fake_logits, "fake_logits")
    softplus = torch.nn.functional.softplus
    return softplus(-real_logits).mean() + softplus(fake_logits).mean()


def gan_losses(
    discriminator: torch.nn.Module, real: torch.Tensor, fake: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(generator loss, discriminator loss) of `fake` (B, ...) (with grad to the generator) against `real`, so that
    one backward of their sum trains both with one optimizer: the generator loss softplus(-D(fake)) reaches the
    generator only (D's parameters enter it detached, through `torch.func.functional_call`), the discriminator loss
    softplus(-D(real)) + softplus(D(fake)) reaches the discriminator only (real and fake enter it detached)."""
    check_tensor(real, "real")
    check_tensor(fake, "fake")
    frozen = {name: p.detach() for name, p in discriminator.named_parameters()}
    generator_loss = gan_generator_loss(torch.func.functional_call(discriminator, frozen, (fake,)))
    d_loss = gan_discriminator_loss(discriminator(real.detach()), discriminator(fake.detach()))
    return generator_loss, d_loss
