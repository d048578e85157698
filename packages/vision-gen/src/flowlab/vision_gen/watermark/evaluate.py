"""Evaluation protocols shared by the watermark benchmarks and CLI: noise-level statistics of every scheme at a
given latent size, embed/extract speed, and robustness summaries (bit accuracy, AUC, TPR at a fixed FPR)."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from flowlab.core.bench import torch_threads
from flowlab.core.metrics.gaussianity import gaussianity_report
from flowlab.vision_gen.watermark.gaussian_shading import GaussianShading, GaussianShadingConfig
from flowlab.vision_gen.watermark.spherical import SphericalConfig, SphericalWatermark
from flowlab.vision_gen.watermark.tree_ring import TreeRing, TreeRingConfig

__all__ = ["SCHEMES", "auc", "latent_statistics", "scheme_latents", "speed_table", "statistics_table", "tpr_at_fpr"]

SCHEMES = (
    "gaussian",
    "spherical_random",
    "spherical_fixed",
    "gs_per_image",
    "gs_fixed_key_random_m",
    "gs_fixed_key_fixed_m",
    "tree_ring",
    "spherical_no_mixing",
    "spherical_no_rotation",
)


def _sd_like(latent_shape: tuple[int, ...]) -> dict:
    """Watermark configurations for a latent shape: the paper's SD setting for 4x64x64, digits16 for 1x16x16."""
    if tuple(latent_shape) == (4, 64, 64):
        return {"sph": SphericalConfig.stable_diffusion(), "gs_shape": (4, 8, 8), "ring": 10}
    if tuple(latent_shape) == (1, 16, 16):
        return {"sph": SphericalConfig.digits16(), "gs_shape": (1, 4, 8), "ring": 3}
    raise ValueError(f"latent_shape: expected (4, 64, 64) or (1, 16, 16), got {latent_shape}")


def scheme_latents(
    scheme: str, n: int, latent_shape: tuple[int, ...], *, seed: int, generator: torch.Generator, batch: int = 250
) -> torch.Tensor:
    """n latents (n, *latent_shape) float32 of one scheme of `SCHEMES` (keys drawn from `seed`)."""
    cfgs = _sd_like(latent_shape)
    sph: SphericalConfig = cfgs["sph"]
    out = []
    for start in range(0, n, batch):
        b = min(batch, n - start)
        if scheme == "gaussian":
            z = torch.randn(b, *latent_shape, generator=generator)
        elif scheme.startswith("spherical"):
            kw = {"spherical_no_mixing": {"mixing": False}, "spherical_no_rotation": {"rotation": False}}.get(
                scheme, {}
            )
            cfg = SphericalConfig(**{**sph.__dict__, **kw})
            wm = SphericalWatermark.from_seed(cfg, seed)
            if scheme == "spherical_fixed":
                m = torch.randint(0, 2, (1, cfg.message_bits), generator=torch.Generator().manual_seed(seed + 1))
                m = m.expand(b, -1)
            else:
                m = torch.randint(0, 2, (b, cfg.message_bits), generator=generator)
            z = wm.embed(m, generator=generator)
        elif scheme.startswith("gs"):
            mode = "per_image" if scheme == "gs_per_image" else "fixed"
            wm = GaussianShading.from_seed(GaussianShadingConfig(latent_shape, cfgs["gs_shape"], mode), seed)
            if scheme == "gs_fixed_key_fixed_m":
                m = torch.randint(0, 2, (1, wm.message_bits), generator=torch.Generator().manual_seed(seed + 1))
                m = m.expand(b, -1)
            else:
                m = torch.randint(0, 2, (b, wm.message_bits), generator=generator)
            z = wm.embed(m, generator=generator, nonces=wm.new_nonces(b, generator=generator))
        elif scheme == "tree_ring":
            z = TreeRing.from_seed(TreeRingConfig(latent_shape, cfgs["ring"]), seed).embed(b, generator=generator)
        else:
            raise ValueError(f"scheme: expected one of {SCHEMES}, got {scheme!r}")
        out.append(z)
    return torch.cat(out)


def statistics_table(
    n: int,
    latent_shape: tuple[int, ...] = (4, 64, 64),
    *,
    seed: int,
    generator: torch.Generator,
    schemes: tuple[str, ...] = SCHEMES,
    device: torch.device | str = "cpu",
    classifier: str | None = "logreg",
) -> dict[str, dict[str, float]]:
    """scheme -> `latent_statistics` of its n latents."""
    return {
        scheme: latent_statistics(
            scheme_latents(scheme, n, latent_shape, seed=seed, generator=generator).to(device),
            generator=generator,
            classifier=classifier,
        )
        for scheme in schemes
    }


def latent_statistics(
    latents: torch.Tensor, *, generator: torch.Generator, classifier: str | None = "logreg"
) -> dict[str, float]:
    """gaussianity_report numbers of latents (n, *latent_shape) (blocks of 128 values for the chi-square of block
    norms, one block below 256 values)."""
    z = latents.reshape(latents.shape[0], -1)
    return gaussianity_report(z, generator=generator, blocks=max(1, z.shape[1] // 128), classifier=classifier)


def _time(fn: Callable[[], object], repeats: int) -> float:
    fn()
    t0 = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - t0) / repeats


def speed_table(*, seed: int, repeats: int = 5, batch: int = 1) -> dict[str, dict[str, float]]:
    """Seconds per latent (4x64x64) to embed and to extract, Spherical vs Gaussian Shading with a per-image
    ChaCha20 key, both at the same batch size, on CPU with one thread (so other load on the machine disturbs the
    comparison less), the diffusion model excluded."""
    with torch_threads(1):
        return _speed_table(seed, repeats, batch)


def _speed_table(seed: int, repeats: int, batch: int) -> dict[str, dict[str, float]]:
    g = torch.Generator().manual_seed(seed)
    sph = SphericalWatermark.from_seed(SphericalConfig.stable_diffusion(), seed)
    gs = GaussianShading.from_seed(GaussianShadingConfig((4, 64, 64), (4, 8, 8), "per_image"), seed)
    m_s = torch.randint(0, 2, (batch, 512), generator=g)
    m_g = torch.randint(0, 2, (batch, 256), generator=g)
    z_s = sph.embed(m_s, generator=g)
    nonces = gs.new_nonces(batch, generator=g)
    z_g = gs.embed(m_g, generator=g, nonces=nonces)
    return {
        "spherical": {
            "embed_s": _time(lambda: sph.embed(m_s, generator=g), repeats) / batch,
            "extract_s": _time(lambda: sph.extract(z_s), repeats) / batch,
        },
        "gaussian_shading_chacha20": {
            "embed_s": _time(lambda: gs.embed(m_g, generator=g, nonces=gs.new_nonces(batch, generator=g)), repeats)
            / batch,
            "extract_s": _time(lambda: gs.extract(z_g, nonces=nonces), repeats) / batch,
        },
    }


def auc(pos: torch.Tensor, neg: torch.Tensor) -> float:
    """Area under the ROC curve of scores (higher = watermarked), ties counted half."""
    pos, neg = pos.double().flatten(), neg.double().flatten()
    greater = (pos[:, None] > neg[None, :]).double().mean()
    ties = (pos[:, None] == neg[None, :]).double().mean()
    return float(greater + 0.5 * ties)


def tpr_at_fpr(pos: torch.Tensor, neg: torch.Tensor, *, fpr: float = 0.01) -> float:
    """True-positive rate at the empirical threshold giving at most `fpr` on the negatives (score > threshold)."""
    from flowlab.vision_gen.watermark.tree_ring import roc_threshold

    thr = roc_threshold(neg, fpr=fpr)
    return float((pos.double() > thr).double().mean())
