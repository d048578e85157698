"""The SFBD-OMNI loop (Algorithms 1 and 2) on the core `fit`: pretrain the bridge posterior on the clean set, then
alternate posterior reconstruction of every corrupted observation with retraining on the reconstructions mixed with
the clean set. One Adam optimiser and one EMA run through all rounds; the offline loop reconstructs the whole pool at
the end of each round, the online loop refreshes a share gamma of it `refreshes_per_round` times a round. Rounds are
the checkpoints: `ckpt_dir/round-K.pt` holds the weights, the optimiser, the EMA and the pool after round K, and a
rerun resumes after the last one written."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from flowlab.core.grids import uniform
from flowlab.core.solvers import sample_bridge
from flowlab.core.train import EMA, fit, load_weights
from flowlab.core.validation import check_device, check_tensor
from flowlab.vision_gen.kit.corruptions import Corruption
from flowlab.vision_gen.sfbd_omni.model import BridgePosterior, SFBDConfig
from flowlab.vision_gen.sfbd_omni.objective import bridge_pair_loss

__all__ = ["SFBDResult", "mixture_batches", "reconstruct", "sfbd_omni"]


@dataclass(frozen=True)
class SFBDResult:
    """model: the posterior (EMA weights, eval mode); pools: the reconstructions of every observation after
    pretraining (round 0) and after each round, (N, C, H, W) each, on the CPU; clean_weight: lambda / (1 + lambda)."""

    model: BridgePosterior
    pools: list[torch.Tensor]
    clean_weight: float


def reconstruct(
    model: BridgePosterior,
    y: torch.Tensor,
    corruption: Corruption,
    config: SFBDConfig,
    *,
    generator: torch.Generator,
    batch: int = 4096,
) -> torch.Tensor:
    """Posterior samples x ~ u_theta(. | y) for observations y: (N, C_y, H, W): the bridge from y' = start(y) plus
    the source noise, `config.sampler_steps` exact bridge steps, in chunks of `batch` on y's device."""
    path = config.path()
    grid = uniform(config.sampler_steps)
    out = []
    with torch.no_grad():
        for chunk in y.split(batch):
            start = path.source(corruption.start(chunk), generator=generator)
            out.append(sample_bridge(model, start, grid, sigma=config.sigma, generator=generator, obs=chunk))
    return torch.cat(out)


def mixture_batches(pool: dict[str, torch.Tensor], clean: torch.Tensor, weight: float, batch_size: int):
    """batches(step, generator) -> (batch_size, C, H, W): each row from `clean` with probability `weight`, else
    from the current `pool["x"]` (a dict, so the pool can be refreshed in place), on the pool's device."""

    def batches(step: int, g: torch.Generator) -> torch.Tensor:
        x = pool["x"]
        rows = x[torch.randint(0, x.shape[0], (batch_size,), generator=g).to(x.device)]
        if weight == 0 or clean.shape[0] == 0:
            return rows
        take = (torch.rand(batch_size, generator=g) < weight).to(x.device)
        picks = clean[torch.randint(0, clean.shape[0], (batch_size,), generator=g).to(x.device)]
        return torch.where(take[:, None, None, None], picks, rows)

    return batches


def _check_data(y: torch.Tensor, clean: torch.Tensor, corruption: Corruption) -> None:
    check_tensor(y, "y", min_dim=4)
    check_tensor(clean, "clean", min_dim=4)
    if y.dim() != 4 or clean.dim() != 4:
        raise ValueError(f"y, clean: expected image batches (N, C, H, W), got {tuple(y.shape)}, {tuple(clean.shape)}")
    if y.shape[0] == 0:
        raise ValueError("y: expected at least one corrupted observation")
    channels = clean.shape[1]
    want = corruption.observation_channels(channels)
    if y.shape[1] != want or y.shape[2:] != clean.shape[2:]:
        raise ValueError(f"y: expected observations of {corruption!r} for {tuple(clean.shape[1:])} images, i.e. "
                         f"(N, {want}, {clean.shape[2]}, {clean.shape[3]}), got {tuple(y.shape)}")  # fmt: skip


def _latest_round(ckpt_dir: Path | None) -> tuple[int, Path | None]:
    if ckpt_dir is None or not ckpt_dir.is_dir():
        return -1, None
    rounds = [(int(p.stem.split("-")[1]), p) for p in ckpt_dir.glob("round-*.pt") if p.stem.split("-")[1].isdigit()]
    return max(rounds) if rounds else (-1, None)


def sfbd_omni(
    y: torch.Tensor,
    clean: torch.Tensor,
    corruption: Corruption,
    config: SFBDConfig,
    *,
    device: torch.device | str = "cpu",
    progress: bool = False,
    ckpt_dir: str | os.PathLike[str] | None = None,
    callback: Callable[[int, torch.Tensor], None] | None = None,
) -> SFBDResult:
    """Learn the clean law from observations y: (N, C_y, H, W) of `corruption` and a clean set (n, C, H, W) (n may
    be 0: the pretraining then regresses the observations' image parts onto themselves). `callback(round, pool)`
    sees each round's reconstructions (N, C, H, W) on the CPU. Returns the `SFBDResult`."""
    if not isinstance(corruption, Corruption):
        raise ValueError(f"corruption: expected a kit Corruption, got {type(corruption).__name__}")
    _check_data(y, clean, corruption)
    device = check_device(device)
    weight = config.weight_for(corruption.identifiable)
    gamma = 1.0 if config.online_gamma is None else config.online_gamma
    refreshes = 1 if config.online_gamma is None else config.refreshes_per_round
    y, clean = y.to(device), clean.to(device)
    model = BridgePosterior(tuple(clean.shape[1:]), y.shape[1], hidden=config.hidden, seed=config.seed).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=config.lr)
    ema = EMA(model, decay=config.ema_decay, warmup_steps=100)
    g = torch.Generator().manual_seed(config.seed)
    path, ckpt = config.path(), Path(ckpt_dir) if ckpt_dir is not None else None
    first = clean if clean.shape[0] else corruption.start(y)
    pool = {"x": first}
    pools: list[torch.Tensor] = []

    def loss(net, x, gen):
        return bridge_pair_loss(net, x, corruption, path, generator=gen), {}

    def refresh(share: float) -> None:
        with ema.swap():
            model.eval()
            if share >= 1:
                pool["x"] = reconstruct(model, y, corruption, config, generator=g)
            else:
                rows = torch.randperm(y.shape[0], generator=g)[: max(1, round(share * y.shape[0]))].to(device)
                pool["x"] = pool["x"].index_put((rows,), reconstruct(model, y[rows], corruption, config, generator=g))
            model.train()

    done, saved = _latest_round(ckpt)
    if saved is not None:
        state = load_weights(saved, map_location=device, name="ckpt_dir")
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        ema.load_state_dict(state["ema"])
        g.set_state(state["generator"])
        pools = list(state["pools"])
        pool["x"] = pools[-1].to(device)

    for k in range(done + 1, config.rounds + 1):
        steps = config.pretrain_steps if k == 0 else config.steps_per_round
        every = max(1, steps // refreshes)

        def hook(info, every=every, online=k > 0 and gamma < 1):
            if online and (info.step + 1) % every == 0:
                refresh(gamma)

        data = mixture_batches(pool, clean if k > 0 else clean[:0], weight, config.batch_size)
        if steps:
            fit(model, loss, data, steps=steps, optimizer=opt, ema=ema, device=device, generator=g,
                callbacks=(hook,), progress=progress, log_every=max(1, steps // 4))  # fmt: skip
        if k == 0 or gamma >= 1:
            refresh(1.0)
        pools.append(pool["x"].detach().cpu().clone())
        if callback is not None:
            callback(k, pools[-1])
        if ckpt is not None:
            ckpt.mkdir(parents=True, exist_ok=True)
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "ema": ema.state_dict(),
                        "generator": g.get_state(), "pools": pools}, ckpt / f"round-{k}.pt")  # fmt: skip
    ema.copy_to_model()
    return SFBDResult(model.eval().requires_grad_(False), pools, weight)
