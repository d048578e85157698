"""The pixel operations of GenDR-Pix: pixel-(un)shuffle in and out, padding to a multiple of the factor and back,
random padding (RandPad) that shifts the r x r grid under the discriminator, and the padding-based CFG (PadCFG)."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from flowlab.vision_gen.gendr_pix.model import NEGATIVE, POSITIVE

__all__ = ["Pads", "crop_pads", "pad_cfg", "pad_to_multiple", "rand_pad", "shuffle_out", "unshuffle_in"]

#: (left, right, top, bottom), the order of torch.nn.functional.pad
Pads = tuple[int, int, int, int]


def _factor(r: object) -> int:
    if isinstance(r, bool) or not isinstance(r, int) or r < 1:
        raise ValueError(f"r: expected a factor >= 1, got {r!r}")
    return r


def _images(x: object, name: str = "x") -> torch.Tensor:
    if not isinstance(x, torch.Tensor) or x.dim() != 4 or x.shape[0] < 1 or not x.is_floating_point():
        raise ValueError(f"{name}: expected float images (B, C, H, W), got {getattr(x, 'shape', type(x).__name__)}")
    return x


def unshuffle_in(x: torch.Tensor, r: int) -> torch.Tensor:
    """x: (B, C, H, W), r | H, W -> (B, C r^2, H / r, W / r) (space-to-depth, parameter-free)."""
    x, r = _images(x), _factor(r)
    if x.shape[2] % r or x.shape[3] % r:
        raise ValueError(f"x: expected H and W multiples of r = {r}, got {tuple(x.shape[2:])}; pad_to_multiple first")
    return F.pixel_unshuffle(x, r)


def shuffle_out(h: torch.Tensor, r: int) -> torch.Tensor:
    """h: (B, C r^2, h, w) -> (B, C, r h, r w) (depth-to-space), the exact inverse of `unshuffle_in`."""
    h, r = _images(h, "h"), _factor(r)
    if h.shape[1] % (r * r):
        raise ValueError(f"h: expected channels divisible by r^2 = {r * r}, got {h.shape[1]}")
    return F.pixel_shuffle(h, r)


def crop_pads(y: torch.Tensor, pads: Pads) -> torch.Tensor:
    """Undo `F.pad(x, pads)`: y (B, C, H + top + bottom, W + left + right) -> (B, C, H, W)."""
    left, right, top, bottom = pads
    return y[..., top : y.shape[-2] - bottom, left : y.shape[-1] - right]


def pad_to_multiple(x: torch.Tensor, r: int, *, mode: str = "reflect") -> tuple[torch.Tensor, Pads]:
    """x: (B, C, H, W) -> (padded x with H and W rounded up to multiples of r, the pads), padded at the right and
    bottom (`mode` of F.pad; reflect needs the pad below the side, replicate is used otherwise)."""
    x, r = _images(x), _factor(r)
    pads = (0, -x.shape[3] % r, 0, -x.shape[2] % r)
    if not any(pads):
        return x, pads
    mode = mode if max(pads) < min(x.shape[2:]) or mode != "reflect" else "replicate"
    return F.pad(x, pads, mode=mode), pads


def rand_pad(x: torch.Tensor, r: int, *, generator: torch.Generator) -> tuple[torch.Tensor, Pads]:
    """RandPad: x (B, C, H, W) -> (x reflect-padded by (p_w, r - p_w, p_h, r - p_h), the pads), p_h, p_w ~ U{0..r-1}
    from `generator`, one draw for the batch: (B, C, H + r, W + r), the r-grid shifted by (p_h, p_w)."""
    x, r = _images(x), _factor(r)
    p_h, p_w = (int(v) for v in torch.randint(0, r, (2,), generator=generator))
    pads = (p_w, r - p_w, p_h, r - p_h)
    return F.pad(x, pads, mode="reflect" if r < min(x.shape[2:]) else "replicate"), pads


def pad_cfg(
    model: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    x_up: torch.Tensor,
    *,
    weight: float,
    pads: tuple[Pads, Pads],
    negative: bool = True,
) -> torch.Tensor:
    """PadCFG: omega G(pad(x, pads[0]), c_pos) + (1 - omega) G(pad(x, pads[1]), c_neg), each branch cropped back
    before mixing; x_up: (B, C, H, W) -> (B, C, H, W). `negative=False`: the second branch also uses the positive
    condition (the plain two-pad ensemble at weight 0.5). With weight 1 only the first branch runs."""
    x_up = _images(x_up, "x_up")
    c = torch.full((x_up.shape[0],), POSITIVE, dtype=torch.long, device=x_up.device)
    first = crop_pads(model(F.pad(x_up, pads[0], mode="reflect"), c), pads[0])
    if weight == 1.0:
        return first
    c_second = torch.full_like(c, NEGATIVE if negative else POSITIVE)
    second = crop_pads(model(F.pad(x_up, pads[1], mode="reflect"), c_second), pads[1])
    return weight * first + (1 - weight) * second
