"""Benchmarks of Spherical Watermark against Gaussian Shading and Tree-Ring.

- vision.watermark.stats: noise-level Gaussianity statistics at SD scale (4x64x64 = 16384, N = 31, l_m = 512,
  l_r = 512, l_c = 128) for every scheme and ablation, no model; plus embed/extract speed per latent.
- vision.watermark.e2e: the tiny digits diffusion model (see e2e.py).
"""

from __future__ import annotations

from flowlab.core.bench import BenchContext, BenchResult, Scenario
from flowlab.vision_gen.kit.attacks import SMALL_SUITE
from flowlab.vision_gen.watermark.e2e import run_e2e
from flowlab.vision_gen.watermark.evaluate import SCHEMES, speed_table, statistics_table

__all__ = ["E2E", "STATS"]

_PAPER = {
    "Spherical [unverified]": {"speed_embed_s": 10**-2, "speed_extract_s": 10**-3.5, "classifier_acc": 0.5},
    "Gaussian Shading [unverified]": {"speed_embed_s": 10**0.5, "classifier_acc_fixed_key": 0.97},
    "Tree-Ring [unverified]": {"classifier_acc": 1.0},
}


def _stats(ctx: BenchContext) -> BenchResult:
    n = int(ctx.config["n"])
    table = statistics_table(n, (4, 64, 64), seed=ctx.seed, generator=ctx.generator, device=ctx.device)
    speed = speed_table(seed=ctx.seed, repeats=int(ctx.config["speed_repeats"]))
    ours = {**table["spherical_random"], **{f"speed_{k}": v for k, v in speed["spherical"].items()}, "n": float(n)}
    baselines = {name: dict(table[name]) for name in SCHEMES if name != "spherical_random"}
    baselines["gs_per_image"].update({f"speed_{k}": v for k, v in speed["gaussian_shading_chacha20"].items()})
    return BenchResult(metrics=ours, baselines=baselines, references=_PAPER)


_DIRECTIONS = {
    "top_eig_over_edge": "min",
    "sign_top_eig_over_edge": "min",
    "classifier_acc": "min",
    "speed_embed_s": "min",
    "speed_extract_s": "min",
}

STATS = Scenario(
    name="vision.watermark.stats",
    package="vision",
    method="watermark",
    run=_stats,
    variants={"quick": {"n": 1000, "speed_repeats": 5}, "full": {"n": 2000, "speed_repeats": 20}},
    directions=_DIRECTIONS,
    description="Gaussianity of watermarked initial latents at SD scale (KS, chi2 of block norms, moments, third "
    "moments, covariance and sign-covariance top eigenvalue vs the Marchenko-Pastur edge, logistic-regression "
    "two-sample accuracy); rows: N(0,I), Spherical random/fixed message, GS per-image/fixed key, Tree-Ring, "
    "Spherical without mixing / rotation; plus embed/extract seconds per latent vs Gaussian Shading (ChaCha20).",
)


_FULL_ATTACKS = ("clean", *SMALL_SUITE)
#: the model learns digits in [-0.75, 0.75] plus N(0, 0.1^2) noise (see e2e.py for why)
_E2E_DATA = {"dither": 0.1, "data_range": 0.75}


def _e2e(ctx: BenchContext) -> BenchResult:
    cfg = ctx.config
    res = run_e2e(
        n=int(cfg["n"]),
        fd_n=int(cfg["fd_n"]),
        train_steps=int(cfg["train_steps"]),
        attacks=tuple(cfg["attacks"]),
        seed=ctx.seed,
        generator=ctx.generator,
        device=ctx.device,
        dither=float(cfg["dither"]),
        data_range=float(cfg["data_range"]),
    )
    return BenchResult(
        metrics=res["spherical"],
        baselines={"gaussian_shading_per_image": res["gaussian_shading"], "tree_ring": res["tree_ring"]},
        references={
            "Spherical [unverified]": {"clean_bit_acc": 0.9999},
            "Gaussian Shading [unverified]": {"clean_bit_acc": 1.0},
        },
    )


E2E = Scenario(
    name="vision.watermark.e2e",
    package="vision",
    method="watermark",
    run=_e2e,
    variants={
        "quick": {**_E2E_DATA, "n": 32, "fd_n": 64, "train_steps": 1500, "attacks": _FULL_ATTACKS},
        "full": {**_E2E_DATA, "n": 1000, "fd_n": 1000, "train_steps": 4000, "attacks": _FULL_ATTACKS},
    },
    directions={"clean_bit_acc": "max", "clean_tpr1": "max", "clean_auc": "max", "fd_vs_clean": "min"},
    description="Tiny 16x16 digits UNet (DiscreteVP.linear, epsilon) on dithered digits: 50-step DPM-Solver++(2M) "
    "generation, attacks, 50-step DDIM inversion; bit accuracy, raw BER, AUC and TPR@1%FPR per attack for "
    "Spherical, Gaussian Shading (per-image key) and Tree-Ring; digits-FD of watermarked vs clean generations with "
    "the clean-vs-clean floor.",
)
