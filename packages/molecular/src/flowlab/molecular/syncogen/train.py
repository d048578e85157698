"""Training SynCoGen, its ablations and the atom-level baseline on `flowlab.core.train.fit`, and the run folder
they are stored in (model.pt: tensors only; config.json: what rebuilds the network).

Variants (`VARIANTS`): "syncogen" (block graph, self-conditioning, every loss), "no_sc" (without
self-conditioning), "no_dist" (without the pairwise-distance and bond-length losses), "no_compat" (trained as
syncogen; sampled without the compatibility mask) and "atoms" (the atom-level baseline: atoms and bond orders,
no synthesis graph). AdamW with linear warm-up, as the paper's code.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from flowlab.core.config import Config
from flowlab.core.distributions import randint
from flowlab.core.train import EMA, fit
from flowlab.molecular.syncogen.model import JointNet, NetConfig
from flowlab.molecular.syncogen.names import VARIANTS
from flowlab.molecular.syncogen.objective import LossConfig, joint_loss
from flowlab.molecular.syncogen.space import ELEMENTS, SynSpace
from flowlab.molecular.syncogen.views import BOND_TOKENS, GraphData, atom_tables, atom_view, block_tables, block_view
from flowlab.molecular.syncogen.vocabulary import Vocabulary

__all__ = ["TrainConfig", "build_net", "load_run", "save_run", "train_variant"]


@dataclass(frozen=True)
class TrainConfig(Config):
    """`steps` AdamW steps of `batch_size` molecules at `lr` (linear warm-up over `warmup` steps), weight decay,
    EMA decay (0: none), network width `dim` and EGNN `layers`, `seed`."""

    steps: int = 2000
    batch_size: int = 32
    lr: float = 3e-4
    weight_decay: float = 1e-5
    warmup: int = 100
    ema_decay: float = 0.0
    dim: int = 64
    layers: int = 3
    seed: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("steps", "batch_size", "dim", "layers"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: expected a positive integer, got {getattr(self, name)}")
        if not self.lr > 0:
            raise ValueError(f"lr: expected a positive learning rate, got {self.lr}")
        if not 0 <= self.ema_decay < 1:
            raise ValueError(f"ema_decay: expected 0 <= ema_decay < 1, got {self.ema_decay}")


def _view(variant: str, space: SynSpace) -> GraphData:
    return atom_view(space) if variant == "atoms" else block_view(space)


def build_net(variant: str, vocab: Vocabulary, n_nodes: int, config: TrainConfig) -> JointNet:
    """The network of `variant` for graphs of `n_nodes` blocks (or atoms, for "atoms")."""
    if variant not in VARIANTS:
        raise ValueError(f"variant: expected one of {VARIANTS}, got {variant!r}")
    sc = variant != "no_sc"
    if variant == "atoms":
        net = NetConfig(n_node=len(ELEMENTS) + 1, n_edge=BOND_TOKENS, n_nodes=n_nodes, slots=1, dim=config.dim,
                        layers=config.layers, self_condition=sc)  # fmt: skip
        return JointNet(net, atom_tables(n_nodes))
    net = NetConfig(n_node=vocab.n_blocks + 1, n_edge=vocab.codec.size, n_nodes=n_nodes, slots=vocab.max_atoms,
                    dim=config.dim, layers=config.layers, self_condition=sc)  # fmt: skip
    return JointNet(net, block_tables(vocab))


def loss_config(variant: str) -> LossConfig:
    """The loss weights of `variant` ("no_dist" drops the distance-type terms)."""
    return replace(LossConfig(), distance=0.0, bond=0.0) if variant == "no_dist" else LossConfig()


def train_variant(
    variant: str,
    vocab: Vocabulary,
    space: SynSpace,
    config: TrainConfig,
    *,
    device: torch.device | str = "cpu",
    ckpt_dir: str | Path | None = None,
    resume: bool = True,
    progress: bool = False,
) -> JointNet:
    """Train `variant` on the training split of `space`; returns the (EMA, when enabled) network in eval mode."""
    data = _view(variant, space.subset(0))
    n_nodes = data.nodes.shape[1]
    torch.manual_seed(config.seed)
    net = build_net(variant, vocab, n_nodes, config)
    loss_cfg = loss_config(variant)
    n_conf = data.coords.shape[1]

    def batches(step: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
        index = randint(len(data), (config.batch_size,), generator=generator)
        return data.batch(index, randint(n_conf, (config.batch_size,), generator=generator))

    def loss_fn(model, batch, generator):
        return joint_loss(model, batch, generator, config=loss_cfg)

    opt = torch.optim.AdamW(net.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    warm = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / max(config.warmup, 1)))
    ema = EMA(net, decay=config.ema_decay) if config.ema_decay else None
    fit(net, loss_fn, batches, steps=config.steps, optimizer=opt, lr_schedule=warm, ema=ema, device=device,
        generator=torch.Generator().manual_seed(config.seed), ckpt_dir=ckpt_dir, resume=resume,
        ckpt_every=max(config.steps // 4, 1), log_every=max(min(50, config.steps // 2), 1), progress=progress,
        config={"variant": variant, **config.to_dict()})  # fmt: skip
    if ema is not None:
        ema.copy_to_model()
    return net.eval()


def save_run(folder: str | Path, variant: str, net: JointNet, config: TrainConfig, extra: dict) -> None:
    """Write model.pt (the state dict) and config.json (variant, network, training settings, `extra`)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    torch.save(net.state_dict(), folder / "model.pt")
    meta = {"method": "syncogen", "variant": variant, "n_nodes": net.config.n_nodes, "train": config.to_dict(), **extra}
    (folder / "config.json").write_text(json.dumps(meta, indent=1))


def load_run(folder: str | Path, vocab: Vocabulary, *, device: torch.device | str = "cpu") -> tuple[JointNet, dict]:
    """The network and config.json of a run folder written by `save_run`; ValueError naming the file otherwise."""
    folder = Path(folder)
    cfg_file, weights = folder / "config.json", folder / "model.pt"
    for f in (cfg_file, weights):
        if not f.is_file():
            raise FileNotFoundError(f"{f}: not found (expected a run folder written by `syncogen train`)")
    try:
        meta = json.loads(cfg_file.read_text())
        config = TrainConfig.from_mapping(meta["train"])
        net = build_net(meta["variant"], vocab, int(meta["n_nodes"]), config)
    except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
        raise ValueError(f"{cfg_file}: not a syncogen run config ({err})") from err
    try:
        state = torch.load(weights, map_location=device, weights_only=True)
        net.load_state_dict(state)
    except Exception as err:  # any unreadable or mismatched weights file is one input error
        raise ValueError(f"{weights}: not readable as this run's weights ({type(err).__name__})") from err
    return net.to(device).eval(), meta
