"""The interpretability procedures, all on deterministic DDIM (eta = 0) from fixed noise, so that a change in the
condition is the only change between two samples:

- manipulation: `boost_and_regenerate` adds `boost` to s_j (0 reproduces the original sample exactly);
  `manipulate` scales s_j over a range (extrapolation beyond 1);
- when: `emergence_curve`, the activations of the running estimate x̂_0 along the sampling trajectory;
- where: `localisation_score`, the share of the pixel change |Δx| (after boosting s_j to a target) inside the
  receptive field of p_j's best-matching cell, against random cells, with a bootstrap interval;
- diagnosis: `dot_prototype` (the prototype a planted mark excites most) and `shortcut_shift` (how boosting it moves
  the kit's digits classifier towards the shortcut's class).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from flowlab.core.paths import AffinePath
from flowlab.core.typing import Prediction
from flowlab.core.validation import check_tensor
from flowlab.vision_gen.kit.metrics import digits_feature_net
from flowlab.vision_gen.kit.sampling import generate
from flowlab.vision_gen.kit.shortcuts import corner_dot
from flowlab.vision_gen.kit.stats import bootstrap_interval
from flowlab.vision_gen.patronus.model import PatronusModel
from flowlab.vision_gen.patronus.sample import check_sampling, sample_images

__all__ = [
    "Localisation",
    "boost_and_regenerate",
    "dot_prototype",
    "emergence_curve",
    "localisation_score",
    "manipulate",
    "shortcut_shift",
]


def _prototype_index(model: PatronusModel, j: int) -> int:
    m = model.config.num_prototypes
    if not (isinstance(j, int) and 0 <= j < m):
        raise ValueError(f"j: expected a prototype index in [0, {m}), got {j!r}")
    return j


def boost_and_regenerate(
    model: PatronusModel, x_T: torch.Tensor, s: torch.Tensor, j: int, boost: float | torch.Tensor, *, steps: int = 50
) -> torch.Tensor:
    """Images (B, 1, S, S) from the fixed noise x_T (B, 1, S, S) given s (B, m) with s_j raised by `boost` (a
    number or (B,) per image); boost 0 gives exactly `sample_images(model, s, x_T)`."""
    j = _prototype_index(model, j)
    check_tensor(s, "s")
    boost = torch.as_tensor(boost, dtype=s.dtype, device=s.device)
    if not bool(torch.isfinite(boost).all()) or boost.dim() > 1 or (boost.dim() == 1 and boost.shape != s.shape[:1]):
        raise ValueError(f"boost: expected a finite number or a ({s.shape[0]},) tensor")
    boosted = s.clone()
    boosted[:, j] = boosted[:, j] + boost
    return sample_images(model, boosted, x_T, steps=steps)


def manipulate(
    model: PatronusModel, x_T: torch.Tensor, s: torch.Tensor, j: int, scales: Sequence[float] = (0, 0.5, 1, 2, 3),
    *, steps: int = 50,
) -> torch.Tensor:  # fmt: skip
    """(len(scales), B, 1, S, S): the images of x_T (B, 1, S, S) given s (B, m) with s_j multiplied by each scale,
    in one batched sampling run."""
    j = _prototype_index(model, j)
    if not scales or not all(isinstance(c, int | float) and 0 <= c < float("inf") for c in scales):
        raise ValueError(f"scales: expected finite numbers >= 0, got {scales!r}")
    factors = torch.ones(len(scales), 1, s.shape[1], dtype=s.dtype, device=s.device)
    factors[:, 0, j] = torch.tensor([float(c) for c in scales], dtype=s.dtype)
    conds = (s[None] * factors).flatten(0, 1)
    images = sample_images(model, conds, x_T.repeat(len(scales), 1, 1, 1), steps=steps)
    return images.unflatten(0, (len(scales), x_T.shape[0]))


class _Recorder(nn.Module):
    """The model's field, recording the activations of its data prediction x̂_0 at every call."""

    def __init__(self, model: PatronusModel) -> None:
        super().__init__()
        self.model, self.trace = model, []
        self.schedule, self.prediction = model.field.schedule, model.field.prediction

    def forward(self, x: torch.Tensor, t: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        eps = self.model.field(x=x, t=t, cond=cond)
        x0 = AffinePath(self.schedule).convert(eps, x_t=x, t=t, source=Prediction.EPSILON, target=Prediction.DATA)
        self.trace.append(self.model.condition(x0.clamp(-1, 1)).mean(0))
        return eps


def emergence_curve(model: PatronusModel, x_T: torch.Tensor, s: torch.Tensor, *, steps: int = 50) -> torch.Tensor:
    """(steps, m): the condition (prototype activations) of the estimate x̂_0 at each of the `steps` DDIM steps
    from x_T (B, 1, S, S) given s (B, m), averaged over the batch (row 0: the noisiest step)."""
    check_sampling(model, s, x_T, steps)
    recorder = _Recorder(model)
    generate(recorder, x_T, steps=steps, method="ddim", cond=s.to(x_T))
    return torch.stack(recorder.trace)


@dataclass(frozen=True)
class Localisation:
    """metrics: inside (mean share of |Δx| inside the receptive field of p_j's best-matching cell in the image),
    inside_boosted (the same for its best-matching cell in the boosted regeneration), random (the same share for
    random cells), area (the receptive field's share of the image), gain = inside - random and gain_boosted with
    their bootstrap intervals (gain_lo, gain_hi, ...), and n (the (image, prototype) pairs whose regeneration
    changed);
    heat: (J, S, S) mean |Δx| per boosted prototype; prototypes: their indices."""

    metrics: dict[str, float]
    heat: torch.Tensor
    prototypes: tuple[int, ...]


def localisation_score(
    model: PatronusModel, images: torch.Tensor, x_T: torch.Tensor, target: torch.Tensor, *,
    prototypes: Sequence[int] | None = None, steps: int = 20, n_random: int = 16, seed: int = 0,
) -> Localisation:  # fmt: skip
    """ "Where" faithfulness: for each image (B, 1, S, S) with its fixed noise x_T (B, 1, S, S) and each prototype j
    (default: all), regenerate with s_j raised to target[j] (target: (m,), e.g. the max of s_j over a reference set)
    and compare with the unboosted regeneration; one batched sampling run for all (j, image) pairs. The shares are
    over the pairs whose regeneration changed (`n` of them); with none, only "area" and "n" are reported."""
    encoder = model.prototype_encoder
    m = encoder.num_prototypes
    js = tuple(range(m)) if prototypes is None else tuple(_prototype_index(model, j) for j in prototypes)
    check_tensor(target, "target")
    if tuple(target.shape) != (m,):
        raise ValueError(f"target: expected ({m},), got {tuple(target.shape)}")
    if not (isinstance(n_random, int) and n_random >= 1):
        raise ValueError(f"n_random: expected an integer >= 1, got {n_random!r}")
    with torch.inference_mode():
        out = encoder(images)
    s, b, k = out.s, images.shape[0], len(js)
    index = torch.tensor(js, device=s.device)
    boosted = s.repeat(k, 1).unflatten(0, (k, b))
    boosted[torch.arange(k), :, index] = torch.maximum(s[:, index].T, target[index, None].to(s))
    regen = sample_images(model, torch.cat([s, boosted.flatten(0, 1)]), x_T.repeat(k + 1, 1, 1, 1), steps=steps)
    delta = (regen[b:].unflatten(0, (k, b)) - regen[:b]).abs().sum(2)  # (k, B, S, S)
    masks = encoder.receptive_masks().to(delta)  # (cells, S, S)
    total = delta.flatten(2).sum(2)
    changed = total > 1e-4 * delta[0, 0].numel()

    def share(cells: torch.Tensor) -> torch.Tensor:  # cells: (..., k, B) -> the share of |Δx| in their fields
        return (delta * masks[cells]).flatten(-2).sum(-1) / total.clamp_min(1e-12)

    with torch.inference_mode():
        after = encoder(regen[b:]).argmin_cell.unflatten(0, (k, b))[torch.arange(k), :, index]  # (k, B)
    metrics = {"area": float(masks.float().mean()), "n": int(changed.sum())}
    if not bool(changed.any()):  # no boost moved any pixel: no share to report
        return Localisation(metrics, delta.mean(1).cpu(), js)
    g = torch.Generator().manual_seed(seed)
    random = share(torch.randint(0, masks.shape[0], (n_random, k, b), generator=g).to(delta.device)).mean(0)
    metrics["random"] = float(random[changed].mean())
    for name, cells in (("", out.argmin_cell[:, index].T), ("_boosted", after)):
        inside = share(cells)
        metrics[f"inside{name}"] = float(inside[changed].mean())
        gain = (inside - random)[changed]
        if gain.numel() >= 2:
            low_high = bootstrap_interval(gain, seed=seed)
            metrics |= dict(zip((f"gain{name}", f"gain{name}_lo", f"gain{name}_hi"), low_high, strict=True))
    return Localisation(metrics, delta.mean(1).cpu(), js)


def dot_prototype(model: PatronusModel, images: torch.Tensor, *, size: int = 2, corner: str = "top_left"
                  ) -> tuple[int, torch.Tensor]:  # fmt: skip
    """(j, rise): the prototype whose activation a `corner_dot` raises most on images (B, 1, S, S), and the mean
    rise of every prototype's activation (m,)."""
    with torch.inference_mode():
        rise = (model.condition(corner_dot(images, size=size, corner=corner)) - model.condition(images)).mean(0)
    return int(rise.argmax()), rise


def shortcut_shift(
    model: PatronusModel, images: torch.Tensor, x_T: torch.Tensor, j: int, value: float, *, target_class: int = 0,
    steps: int = 20,
) -> tuple[dict[str, float], torch.Tensor, torch.Tensor]:  # fmt: skip
    """Regenerate images (B, 1, S, S) from x_T given their s, and again with s_j raised to `value`; the kit's
    digits classifier reads both. Returns (metrics, original regenerations, boosted ones) with metrics: share
    classified `target_class` before and after (`share_before`, `share_after`), their difference `shift`, and the
    mean classifier probability of `target_class` before and after."""
    with torch.inference_mode():
        s = model.condition(images)
    boost = (torch.as_tensor(float(value), dtype=s.dtype) - s[:, j]).clamp_min(0)
    before = sample_images(model, s, x_T, steps=steps)
    after = boost_and_regenerate(model, x_T, s, j, boost, steps=steps)
    net = digits_feature_net(device=before.device)
    with torch.inference_mode():
        probs = [net(x).softmax(-1)[:, target_class] for x in (before, after)]
        preds = [net(x).argmax(-1) == target_class for x in (before, after)]
    metrics = {"share_before": float(preds[0].float().mean()), "share_after": float(preds[1].float().mean()),
               "prob_before": float(probs[0].mean()), "prob_after": float(probs[1].mean())}  # fmt: skip
    metrics["shift"] = metrics["share_after"] - metrics["share_before"]
    return metrics, before, after
