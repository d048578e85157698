"""DDP under `torchrun`: process-group set-up from the environment, per-rank seeds, batch sharding, metric
reduction.

There is no FlowLab launcher. Start N processes with `torchrun --nproc-per-node N script.py` (or `python -m
torch.distributed.run ...`); the script calls `init_distributed()` and then `fit(...)`, which wraps the model
in `DistributedDataParallel` when a process group is initialised. Tests and benchmarks start local Gloo groups with
`flowlab.core.train.spawn_gloo`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

__all__ = [
    "DistInfo",
    "dist_info",
    "init_distributed",
    "is_distributed",
    "rank_generator",
    "shard_batch",
    "unwrap_model",
]


@dataclass(frozen=True)
class DistInfo:
    """Where this process sits: `rank` of `world_size`, `local_rank` on its node, its `device`, `is_main`
    (rank 0)."""

    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    is_main: bool


def is_distributed() -> bool:
    """True when a `torch.distributed` process group is initialised in this process."""
    return dist.is_available() and dist.is_initialized()


def _env_int(name: str, default: int | None = None) -> int:
    value = os.environ.get(name)
    if value is None:
        if default is None:
            raise ValueError(f"{name}: environment variable not set (start the script with torchrun)")
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name}: expected an integer in the environment, got {value!r}") from None


def _default_device(local_rank: int) -> torch.device:
    return torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")


def dist_info() -> DistInfo:
    """This process's `DistInfo`, initialising nothing (rank 0 of 1 when no process group is set up)."""
    if not is_distributed():
        return DistInfo(rank=0, world_size=1, local_rank=0, device=_default_device(0), is_main=True)
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = _env_int("LOCAL_RANK", rank)
    device = torch.device("cuda", local_rank) if dist.get_backend() == "nccl" else torch.device("cpu")
    return DistInfo(rank=rank, world_size=world, local_rank=local_rank, device=device, is_main=rank == 0)


def init_distributed(*, device: torch.device | str | None = None) -> DistInfo:
    """Join the process group described by torchrun's `RANK`, `WORLD_SIZE`, `LOCAL_RANK` (+
    `MASTER_ADDR/PORT`).

    The backend is NCCL on CUDA and Gloo on CPU; the device is `cuda:LOCAL_RANK` when CUDA is available (and
    made current), else the CPU, unless `device` is given ("cpu" forces Gloo). Without torchrun's variables
    this is a single-process run: nothing is initialised and rank 0 of 1 is returned. Calling it again returns
    the same info.
    """
    if is_distributed():
        return dist_info()
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        local = _default_device(0) if device is None else torch.device(device)
        return DistInfo(rank=0, world_size=1, local_rank=0, device=local, is_main=True)
    rank, world, local_rank = _env_int("RANK"), _env_int("WORLD_SIZE"), _env_int("LOCAL_RANK", 0)
    if not (0 <= rank < world):
        raise ValueError(f"RANK: expected 0 <= RANK < WORLD_SIZE={world}, got {rank}")
    for name in ("MASTER_ADDR", "MASTER_PORT"):
        if name not in os.environ:
            raise ValueError(f"{name}: environment variable not set (start the script with torchrun)")
    dev = _default_device(local_rank) if device is None else torch.device(device)
    if dev.type == "cuda":
        if dev.index is None:
            dev = torch.device("cuda", local_rank)
        torch.cuda.set_device(dev)
    backend = "nccl" if dev.type == "cuda" else "gloo"
    dist.init_process_group(backend=backend, init_method="env://", rank=rank, world_size=world)
    return DistInfo(rank=rank, world_size=world, local_rank=local_rank, device=dev, is_main=rank == 0)


def rank_generator(seed: int, *, device: torch.device | str = "cpu") -> torch.Generator:
    """A generator on `device` seeded with `seed + rank`, so ranks draw different noise and runs stay
    reproducible."""
    return torch.Generator(device=device).manual_seed(int(seed) + dist_info().rank)


def unwrap_model(model: nn.Module) -> nn.Module:
    """The plain module under `DistributedDataParallel`/`DataParallel` and `torch.compile` wrappers."""
    while True:
        if isinstance(model, nn.parallel.DistributedDataParallel | nn.DataParallel):
            model = model.module
        elif hasattr(model, "_orig_mod") and isinstance(model._orig_mod, nn.Module):
            model = model._orig_mod
        else:
            return model


# A batch is a tensor or a (nested) tuple / list / dict of tensors, batch first.


def _map_batch(fn: Callable[[torch.Tensor], Any], batch: Any, name: str = "batch") -> Any:
    if isinstance(batch, torch.Tensor):
        return fn(batch)
    if isinstance(batch, Mapping):
        return {k: _map_batch(fn, v, f"{name}[{k!r}]") for k, v in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # namedtuple
        return type(batch)(*(_map_batch(fn, v, f"{name}.{f}") for f, v in zip(batch._fields, batch)))
    if isinstance(batch, list | tuple):
        return type(batch)(_map_batch(fn, v, f"{name}[{i}]") for i, v in enumerate(batch))
    raise ValueError(f"{name}: expected a tensor or a tuple/list/dict of tensors, got {type(batch).__name__}")


def _batch_size(batch: Any, name: str = "batch") -> int:
    sizes: list[int] = []

    def record(t: torch.Tensor) -> torch.Tensor:
        if t.dim() == 0:
            raise ValueError(f"{name}: every tensor needs a leading batch dimension, got a 0-d tensor")
        sizes.append(int(t.shape[0]))
        return t

    _map_batch(record, batch, name)
    if not sizes:
        raise ValueError(f"{name}: holds no tensors")
    if len(set(sizes)) > 1:
        raise ValueError(f"{name}: tensors disagree on the batch size (leading dims {sizes})")
    return sizes[0]


def shard_batch(batch: Any, *, rank: int | None = None, world_size: int | None = None) -> Any:
    """This rank's contiguous slice of a global batch: rows [rank * B/W, (rank + 1) * B/W) of every tensor.

    `batch`: a tensor or tuple/list/dict of tensors with a common leading size B divisible by W (the world
    size, from the process group unless given).
    """
    info = dist_info()
    rank = info.rank if rank is None else rank
    world_size = info.world_size if world_size is None else world_size
    if world_size < 1 or not (0 <= rank < world_size):
        raise ValueError(f"rank, world_size: expected 0 <= rank < world_size, got rank={rank}, world_size={world_size}")
    size = _batch_size(batch)
    if size % world_size:
        raise ValueError(f"batch: global batch size {size} is not divisible by the world size {world_size}")
    per_rank = size // world_size
    return _map_batch(lambda t: t[rank * per_rank : (rank + 1) * per_rank], batch)


def all_reduce_sum(values: torch.Tensor) -> torch.Tensor:
    """Sum a 1-D tensor over ranks (unchanged in a single process); the result lives on the rank's comm
    device."""
    if is_distributed() and dist.get_world_size() > 1:
        values = values.to(dist_info().device, copy=True)
        dist.all_reduce(values, op=dist.ReduceOp.SUM)
    return values


def all_gather_tensor(value: torch.Tensor) -> list[torch.Tensor]:
    """Every rank's copy of `value` (same shape and dtype on all ranks), on the CPU, in rank order."""
    if not (is_distributed() and dist.get_world_size() > 1):
        return [value.detach().cpu()]
    comm = value.to(dist_info().device)
    out = [torch.empty_like(comm) for _ in range(dist.get_world_size())]
    dist.all_gather(out, comm)
    return [t.cpu() for t in out]
