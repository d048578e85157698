"""`vision.molm.capacity`: MOLM's capacity / quality trade-off over (L marked blocks, P adapters per block) in
{(2, 4), (4, 4), (4, 16)}, i.e. 4-, 8- and 16-bit keys in the kit's frozen tiny digits decoder: each model is trained
alike and read on held-out keys (bit accuracy and TPR at 1 % FPR, clean and under JPEG, rotation and resizing), with
its training keys' accuracy, PSNR / SSIM and digits-FD. One job per (L, P), one torch thread each; training runs on
the bench's device, evaluation on the CPU."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import torch

from flowlab.core.bench import BenchContext, BenchResult, Curve, Scenario, parallel_map
from flowlab.core.config import Config
from flowlab.vision_gen.kit.autoencoder import AutoencoderConfig, autoencoder_artifact, tiny_autoencoder
from flowlab.vision_gen.kit.metrics import digits_feature_net, feature_net_artifact
from flowlab.vision_gen.watermark.molm.benchmarks.digits import digit_latents, scenario_keys, training_keys_metrics
from flowlab.vision_gen.watermark.molm.evaluate import Scheme, attack_metrics, metric_name, quality_metrics
from flowlab.vision_gen.watermark.molm.markers import DIGITS_BLOCKS
from flowlab.vision_gen.watermark.molm.model import MolmConfig, MolmModel
from flowlab.vision_gen.watermark.molm.train import TrainConfig, train_molm

__all__ = ["BLOCKS_BY_COUNT", "CAPACITY", "CapacityBench"]

#: the marked blocks for L = 2 (the decoder's two residual blocks) and L = 4 (the headline's four)
BLOCKS_BY_COUNT = {2: ("1", "4.0"), 4: DIGITS_BLOCKS}
OURS = "L4_P4"


@dataclass(frozen=True)
class CapacityBench(Config):
    """One MOLM model per (L, P) of `grid` (L a key of BLOCKS_BY_COUNT, P a power of two), in the frozen decoder of
    `autoencoder`, each trained by `train`; `n` test digits per attack of `attacks`; up to `workers` processes."""

    autoencoder: AutoencoderConfig
    train: TrainConfig
    grid: tuple[tuple[int, int], ...]
    n: int
    attacks: tuple[str, ...]
    workers: int

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.grid or any(blocks not in BLOCKS_BY_COUNT for blocks, _ in self.grid):
            raise ValueError(f"grid: expected (L, P) pairs with L in {sorted(BLOCKS_BY_COUNT)}, got {self.grid!r}")


def _job(cfg: CapacityBench, seed: int, blocks: int, adapters: int, device: str) -> dict[str, float]:
    """One (L, P) model trained on `device`, evaluated on the CPU -> its row."""
    torch.set_num_threads(1)
    ae = tiny_autoencoder(cfg.autoencoder, device="cpu")
    (z, _), (zt, clean) = digit_latents(ae, "train"), digit_latents(ae, "test")
    zt, clean = zt[: cfg.n], clean[: cfg.n]
    torch.manual_seed(seed)
    model = MolmModel(ae.decoder, MolmConfig(blocks=BLOCKS_BY_COUNT[blocks], num_adapters=adapters))
    bits = model.key_bits
    start = time.perf_counter()
    train_molm(model, z, replace(cfg.train, seed=seed, split_seed=seed), digits_feature_net(), device=device)
    seconds = time.perf_counter() - start
    model.cpu()
    held_out, seen = scenario_keys(cfg.n, bits, seed)
    scheme = Scheme("molm", model.mark, model.extractor, bits)
    row = attack_metrics(scheme, zt, clean, held_out, cfg.attacks, seed=seed)
    row |= training_keys_metrics(scheme, zt, clean, seen, row["clean_bit_acc"], seed)
    return row | quality_metrics(scheme, zt, clean, held_out) | {"key_bits": float(bits), "train_seconds": seconds}


def run_capacity(ctx: BenchContext) -> BenchResult:
    cfg: CapacityBench = ctx.config
    n = len(cfg.grid)
    rows = parallel_map(_job, [cfg] * n, [ctx.seed] * n, *zip(*cfg.grid, strict=True), [str(ctx.device)] * n,
                        workers=cfg.workers)  # fmt: skip
    table = {f"L{blocks}_P{adapters}": row for (blocks, adapters), row in zip(cfg.grid, rows, strict=True)}
    order = sorted(rows, key=lambda row: row["key_bits"])
    bits = [row["key_bits"] for row in order]
    accuracy = {spec: (bits, [row[f"{metric_name(spec)}_bit_acc"] for row in order]) for spec in cfg.attacks}
    curves = (
        Curve("Held-out keys' bit accuracy against key length", "key bits (L log2 P)", "bit accuracy", accuracy),
        Curve("Watermark visibility against key length", "key bits (L log2 P)", "PSNR vs clean decode (dB)",
              {"PSNR": (bits, [row["psnr"] for row in order])}),
    )  # fmt: skip
    return BenchResult(metrics=table.pop(OURS), baselines=table, curves=curves)


_QUICK = CapacityBench(
    autoencoder=AutoencoderConfig(),
    train=TrainConfig(steps=600),
    grid=((4, 16), (4, 4), (2, 4)),  # the slowest first: three jobs on two processes
    n=270,
    attacks=("clean", "jpeg@50", "rotate@10", "resize@0.5"),
    workers=2,
)
_FULL = replace(_QUICK, train=TrainConfig(steps=20_000, batch_size=128))
_SMOKE = replace(_QUICK, autoencoder=AutoencoderConfig(steps=20), train=TrainConfig(steps=3, batch_size=8), n=16,
                 attacks=("clean", "jpeg@50"), workers=1)  # fmt: skip

_MAX = ("clean_bit_acc", "clean_tpr1", "jpeg50_bit_acc", "rotate10_bit_acc", "resize0p5_bit_acc", "psnr", "ssim")
CAPACITY = Scenario(
    name="vision.molm.capacity",
    package="vision",
    method="molm",
    run=run_capacity,
    variants={"smoke": _SMOKE, "quick": _QUICK, "full": _FULL},
    expected_seconds={"smoke": 10, "quick": 90, "full": 3600},
    directions={name: "max" for name in _MAX} | {"fd_marked": "min", "heldout_gap": "min"},
    requires=lambda cfg, device: (autoencoder_artifact(cfg.autoencoder), feature_net_artifact()),
    description="MOLM's capacity / quality trade-off: (L, P) in {(2, 4), (4, 4), (4, 16)} (4-, 8- and 16-bit keys) "
    "in the kit's frozen tiny digits decoder, read on held-out keys: bit accuracy and TPR@1%FPR clean and under "
    "JPEG 50, rotation 10 and resize 0.5, the training keys' accuracy, PSNR/SSIM, digits-FD.",
)
