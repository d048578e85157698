"""End-to-end watermarking of a tiny pixel-space digits diffusion model (1x16x16, l_x = 256).

The model learns dithered digits: images in [-0.75, 0.75] plus N(0, 0.1² I) (`dither`, `data_range`). Upsampled
8x8 digits span a 64-dim subspace of the 256 pixels. A generator of such data shrinks the initial noise off that
subspace to the last grid noise level (0.01 of its size), below the tiny model's own error, so the code bits carried
there are lost: raw BER about 0.2 and bit accuracy about 0.83 for a model of undithered digits, even with exact
inversion. With dither the data have full support, the noise survives in the images as faint grain (about 0.1 of
its size), and the range leaves room for it inside [-1, 1].

Spherical (N = 7, l_m = 32, l_r = 32, l_c = 16), Gaussian Shading (32 bits as a 1x4x8 block tiled 4x2, per-image
ChaCha20 nonce) and Tree-Ring (radius 3) write the initial noise; images come from 50-step DPM-Solver++(2M); each
image is attacked, inverted with 50-step naive DDIM and decoded. Unwatermarked generations, attacked the same way,
are the negatives for AUC / TPR at 1% FPR (scores: matching bits with the image's message, or minus the Tree-Ring
distance). Quality: digits-FD of watermarked vs clean generations against the floor between clean sets (the mean and
the largest of three pairs), and of each set to the dithered held-out digits.
"""

from __future__ import annotations

from functools import partial

import torch

from flowlab.vision_gen.kit.attacks import SMALL_SUITE, resolve_attack
from flowlab.vision_gen.kit.data import from_unit, load_digits_images, to_unit
from flowlab.vision_gen.kit.metrics import FeatureNetConfig, digits_fd
from flowlab.vision_gen.kit.sampling import batched, generate, invert_to_noise
from flowlab.vision_gen.kit.train import DigitsDenoiserConfig, digits_denoiser
from flowlab.vision_gen.watermark.evaluate import auc, tpr_at_fpr
from flowlab.vision_gen.watermark.gaussian_shading import GaussianShading, GaussianShadingConfig
from flowlab.vision_gen.watermark.spherical import SphericalConfig, SphericalWatermark
from flowlab.vision_gen.watermark.tree_ring import TreeRing, TreeRingConfig

__all__ = ["ATTACKS", "TEACHER", "run_e2e"]

#: the attack table: the kit's small suite, then rotation, regeneration and PGD with the generating model itself
#: (as in MOLM's table; PGD follows the gradient of a 10-step inversion, `kit.attacks.inversion_pgd`)
ATTACKS = ("clean", *SMALL_SUITE, "rotate@10", "regenerate@0.2", "pgd@0.03")

#: the digits model of the quick e2e run and of the `flowlab watermark` image commands (one cached artifact)
TEACHER = DigitsDenoiserConfig(size=16, data_range=0.75, steps=1500, dither=0.1)

#: the unwatermarked generation sets: "clean" is the negative class and the FD reference, the three pairs of
#: sets give the clean-vs-clean FD floor (mean and max)
_CLEAN = ("clean", "clean_b", "clean_c")


def run_e2e(
    *,
    n: int,
    teacher: DigitsDenoiserConfig,
    attacks: tuple[str, ...] = ATTACKS,
    steps: int = 50,
    inversion_steps: int = 50,
    seed: int,
    generator: torch.Generator,
    device: torch.device | str = "cpu",
    batch: int = 256,
    fd_n: int | None = None,
    features: FeatureNetConfig | None = None,
) -> dict[str, dict[str, float]]:
    """scheme -> metrics ("<attack>_bit_acc", "<attack>_raw_ber", "<attack>_auc", "<attack>_tpr1", "fd", ...).

    n images per scheme go through the attacks; fd_n >= n (default n) per set are generated for the digits-FD.
    teacher: the shared digits model (a cached artifact); its `dither` (the std of the Gaussian noise its training
    images carry) and `data_range` (their half-range) shape the held-out reference too. features: the digits-FD's
    feature net (default: the kit's).
    """
    fd = partial(digits_fd, features=features)
    dev = torch.device(device)
    fd_n = n if fd_n is None else fd_n
    if fd_n < n:
        raise ValueError(f"fd_n: expected at least n = {n}, got {fd_n}")
    if teacher.size != 16:
        raise ValueError(f"teacher: expected a 16x16 digits model, got size {teacher.size}")
    dither, data_range = teacher.dither, teacher.data_range
    field = digits_denoiser(teacher, device=dev)
    shape = (1, 16, 16)
    sph = SphericalWatermark.from_seed(SphericalConfig.digits16(), seed)
    gs = GaussianShading.from_seed(GaussianShadingConfig(shape, (1, 4, 8), "per_image"), seed)
    tr = TreeRing.from_seed(TreeRingConfig(shape, radius=3), seed)
    msgs = torch.randint(0, 2, (fd_n, 32), generator=generator)
    nonces = gs.new_nonces(fd_n, generator=generator)
    latents = {
        "spherical": sph.embed(msgs, generator=generator),
        "gaussian_shading": gs.embed(msgs, generator=generator, nonces=nonces),
        "tree_ring": tr.embed(fd_n, generator=generator),
        **{name: torch.randn(fd_n, *shape, generator=generator) for name in _CLEAN},
    }
    everything = batched(lambda z: generate(field, z.to(dev), steps=steps), torch.cat(list(latents.values())), batch)
    gen = dict(zip(latents, everything.split(fd_n)))
    out: dict[str, dict[str, float]] = {k: {} for k in ("spherical", "gaussian_shading", "tree_ring")}
    floors = [fd(gen[a], gen[b]) for i, a in enumerate(_CLEAN) for b in _CLEAN[i + 1 :]]
    held_out = load_digits_images(16, split="test", value_range=(-data_range, data_range)).x
    held_out = held_out + dither * torch.randn(held_out.shape, generator=torch.Generator().manual_seed(seed))
    fd_clean_to_data = fd(gen["clean"], held_out.to(gen["clean"]))
    for k in out:
        out[k]["fd_vs_clean"] = fd(gen[k], gen["clean"])
        out[k]["fd_floor"] = sum(floors) / len(floors)
        out[k]["fd_floor_max"] = max(floors)
        out[k]["fd_to_data"] = fd(gen[k], held_out.to(gen[k]))
        out[k]["fd_clean_to_data"] = fd_clean_to_data
    gen, msgs, nonces = {k: v[:n] for k, v in gen.items()}, msgs[:n], nonces[:n]
    ag = torch.Generator().manual_seed(seed + 17)
    sets = ("spherical", "gaussian_shading", "tree_ring", "clean")
    for spec in attacks:
        attack = resolve_attack(spec, denoiser=field)  # images in the model's own [-1, 1]: data_range 1
        imgs = torch.cat([from_unit(attack(to_unit(gen[k]), generator=ag)) for k in sets])
        noise = batched(lambda x: invert_to_noise(field, x, steps=inversion_steps), imgs, batch).cpu().float()
        inv = dict(zip(sets, noise.split(n)))
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
