"""End-to-end watermarking of a tiny pixel-space digits diffusion model (1x16x16, l_x = 256).

Spherical (N = 7, l_m = 32, l_r = 32, l_c = 16), Gaussian Shading (32 bits as a 1x4x8 block tiled 4x2, per-image
ChaCha20 nonce) and Tree-Ring (radius 3) write the initial noise; images come from 50-step DPM-Solver++(2M); each
image is attacked, inverted with 50-step naive DDIM and decoded. Unwatermarked generations, attacked the same way,
are the negatives for AUC / TPR at 1% FPR (scores: matching bits with the image's message, or minus the Tree-Ring
distance). Quality: digits-FD of watermarked vs clean generations against the floor between two clean sets.
"""

from __future__ import annotations

import torch

from flowlab.vision_gen.kit.attacks import SMALL_SUITE, parse_attack
from flowlab.vision_gen.kit.data import from_unit, load_digits_images, to_unit
from flowlab.vision_gen.kit.metrics import digits_fd
from flowlab.vision_gen.kit.sampling import generate, invert_to_noise
from flowlab.vision_gen.kit.train import train_digits_denoiser
from flowlab.vision_gen.watermark.evaluate import auc, tpr_at_fpr
from flowlab.vision_gen.watermark.gaussian_shading import GaussianShading, GaussianShadingConfig
from flowlab.vision_gen.watermark.spherical import SphericalConfig, SphericalWatermark
from flowlab.vision_gen.watermark.tree_ring import TreeRing, TreeRingConfig

__all__ = ["run_e2e"]


def _batched(fn, x: torch.Tensor, batch: int) -> torch.Tensor:
    return torch.cat([fn(x[i : i + batch]) for i in range(0, x.shape[0], batch)])


def run_e2e(
    *,
    n: int,
    train_steps: int,
    attacks: tuple[str, ...] = ("clean", *SMALL_SUITE),
    steps: int = 50,
    inversion_steps: int = 50,
    seed: int,
    generator: torch.Generator,
    device: torch.device | str = "cpu",
    batch: int = 256,
) -> dict[str, dict[str, float]]:
    """scheme -> metrics ("<attack>_bit_acc", "<attack>_raw_ber", "<attack>_auc", "<attack>_tpr1", "fd", ...)."""
    dev = torch.device(device)
    field = train_digits_denoiser(load_digits_images(16, split="train").x, steps=train_steps, seed=seed, device=dev)
    shape = (1, 16, 16)
    sph = SphericalWatermark.from_seed(SphericalConfig.digits16(), seed)
    gs = GaussianShading.from_seed(GaussianShadingConfig(shape, (1, 4, 8), "per_image"), seed)
    tr = TreeRing.from_seed(TreeRingConfig(shape, radius=3), seed)
    msgs = torch.randint(0, 2, (n, 32), generator=generator)
    nonces = gs.new_nonces(n, generator=generator)
    latents = {
        "spherical": sph.embed(msgs, generator=generator),
        "gaussian_shading": gs.embed(msgs, generator=generator, nonces=nonces),
        "tree_ring": tr.embed(n, generator=generator),
        "clean": torch.randn(n, *shape, generator=generator),
        "clean_b": torch.randn(n, *shape, generator=generator),
    }
    gen = {k: _batched(lambda z: generate(field, z.to(dev), steps=steps), v, batch) for k, v in latents.items()}
    out: dict[str, dict[str, float]] = {k: {} for k in ("spherical", "gaussian_shading", "tree_ring")}
    floor = digits_fd(gen["clean"], gen["clean_b"])
    for k in out:
        out[k]["fd_vs_clean"] = digits_fd(gen[k], gen["clean"])
        out[k]["fd_floor"] = floor
    ag = torch.Generator().manual_seed(seed + 17)
    for spec in attacks:
        attack = (lambda x, generator=None: x) if spec == "clean" else parse_attack(spec)
        inv = {}
        for k in ("spherical", "gaussian_shading", "tree_ring", "clean"):
            imgs = from_unit(attack(to_unit(gen[k]), generator=ag))
            inv[k] = _batched(lambda x: invert_to_noise(field, x, steps=inversion_steps), imgs, batch).cpu().float()
        for k, wm in (("spherical", sph), ("gaussian_shading", gs)):
            kw = {"nonces": nonces} if k == "gaussian_shading" else {}
            res, null = wm.extract(inv[k], **kw), wm.extract(inv["clean"], **kw)
            pos, neg = (res.bits == msgs).sum(-1), (null.bits == msgs).sum(-1)
            out[k][f"{spec}_bit_acc"] = float(res.bit_accuracy(msgs).mean())
            out[k][f"{spec}_raw_ber"] = float(res.raw_bit_error(msgs).mean())
            out[k][f"{spec}_auc"] = auc(pos, neg)
            out[k][f"{spec}_tpr1"] = tpr_at_fpr(pos, neg, fpr=0.01)
        pos, neg = tr.score(inv["tree_ring"]), tr.score(inv["clean"])
        out["tree_ring"][f"{spec}_auc"] = auc(pos, neg)
        out["tree_ring"][f"{spec}_tpr1"] = tpr_at_fpr(pos, neg, fpr=0.01)
    return out
