"""`fit`: a plain training loop with accumulation, clipping, EMA, checkpoint/resume, progress and DDP.

Data. `data` is either a callable `data(step, generator) -> batch` (step: the 0-based index of the optimiser
step about to be taken) or an iterable of batches (an infinite iterator, a list or a DataLoader; a re-iterable
such as a list or DataLoader is cycled, a one-shot iterator that runs dry is an error). A batch is a tensor or
a (nested) tuple/list/dict of tensors sharing their leading size; it is what this process handles in one
optimiser step. It is split into `accumulate` micro-batches along dim 0 (a memory knob: the update is the same
for any `accumulate`). Under DDP each rank supplies its share of the global batch (e.g.
`shard_batch(global_batch)`, or a DataLoader with a `DistributedSampler`), every rank must use the same batch
size, and `samples_seen` counts the global batch.

Resume. Checkpoints are written every `ckpt_every` steps and at the end. With `resume=True` the latest
checkpoint in `ckpt_dir` restores the model, EMA, optimizer, LR schedule, torch's RNG and `generator`, the
step and the samples seen. A callable `data` depends only on the step index and the restored generator, so a
resumed run reproduces the uninterrupted one bit for bit (CPU; on GPU up to non-deterministic kernels). An
iterable is not fast-forwarded: the run continues with whatever it yields next, so hand in one positioned for
the resumed step if the order matters.
"""

from __future__ import annotations

import itertools
import logging
import math
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from tqdm.auto import tqdm

from flowlab.core.train.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint
from flowlab.core.train.distributed import (
    _batch_size,
    _map_batch,
    all_reduce_sum,
    dist_info,
    is_distributed,
    unwrap_model,
)
from flowlab.core.train.ema import EMA

__all__ = ["FitResult", "LossFn", "StepInfo", "fit"]

logger = logging.getLogger(__name__)

LossFn = Callable[[nn.Module, Any, torch.Generator], tuple[torch.Tensor, Mapping[str, Any]]]
_RESERVED = ("loss", "lr", "grad_norm", "step", "samples_seen")


@dataclass(frozen=True)
class StepInfo:
    """Handed to each callback after every optimiser step (on every rank; write files only when `is_main`).

    `logs` holds the metrics averaged since the previous log step (all-reduced) on log steps, else None.
    """

    step: int
    samples_seen: int
    logs: Mapping[str, float] | None
    model: nn.Module
    ema: EMA | None
    is_main: bool


@dataclass(frozen=True)
class FitResult:
    """`steps` and `samples_seen` reached, the last logged metrics, every log row of this call, the last
    checkpoint written or loaded, and the checkpoint this call resumed from (None for a fresh start)."""

    steps: int
    samples_seen: int
    logs: Mapping[str, float]
    history: tuple[Mapping[str, float], ...]
    checkpoint: Path | None
    resumed_from: Path | None


def _positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name}: expected a positive int, got {value!r}")
    return value


def _batches(data: Any, generator: torch.Generator, start: int) -> Iterator[Any]:
    if isinstance(data, torch.Tensor):
        raise ValueError("data: a tensor is not a stream of batches; pass itertools.repeat(batch) or a callable")
    if isinstance(data, Iterator):  # one-shot: used as it is
        return data
    if isinstance(data, Iterable):  # re-iterable (list, DataLoader): cycled
        return _cycle(data)
    if callable(data):
        return (data(step, generator) for step in itertools.count(start))
    raise ValueError(
        f"data: expected batches (an iterable) or a callable data(step, generator), not {type(data).__name__}"
    )


def _cycle(data: Iterable[Any]) -> Iterator[Any]:
    while True:
        empty = True
        for batch in data:
            empty = False
            yield batch
        if empty:
            raise ValueError("data: the iterable yields no batches")


def _scalar(value: Any, device: torch.device, dtype: torch.dtype, name: str) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise ValueError(f"{name}: expected a scalar, got shape {tuple(value.shape)}")
        return value.detach().to(device, dtype).reshape(())
    if isinstance(value, int | float) and not isinstance(value, bool):
        return torch.tensor(float(value), device=device, dtype=dtype)
    raise ValueError(f"{name}: expected a scalar tensor or number, got {type(value).__name__}")


def _micro_batches(batch: Any, accumulate: int, size: int) -> list[tuple[Any, int]]:
    if accumulate == 1:
        return [(batch, size)]
    if size < accumulate:
        raise ValueError(f"accumulate: {accumulate} micro-batches need a batch of at least {accumulate}, got {size}")
    bounds = [round(i * size / accumulate) for i in range(accumulate + 1)]
    return [(_map_batch(lambda t, a=a, b=b: t[a:b], batch), b - a) for a, b in itertools.pairwise(bounds)]


def fit(
    model: nn.Module,
    loss_fn: LossFn,
    data: Iterable[Any] | Callable[[int, torch.Generator], Any],
    *,
    steps: int | None = None,
    samples: int | None = None,
    optimizer: torch.optim.Optimizer,
    lr_schedule: torch.optim.lr_scheduler.LRScheduler | None = None,
    ema: EMA | None = None,
    grad_clip: float | None = 1.0,
    accumulate: int = 1,
    ckpt_dir: str | os.PathLike[str] | None = None,
    ckpt_every: int = 1000,
    resume: bool = True,
    device: torch.device | str,
    generator: torch.Generator,
    callbacks: Sequence[Callable[[StepInfo], None]] = (),
    log_every: int = 100,
    progress: bool = True,
    model_kwargs: Mapping[str, Any] | None = None,
    config: Mapping[str, Any] | None = None,
) -> FitResult:
    """Train `model` for `steps` optimiser steps or until `samples` samples have been seen (give exactly one).

    `loss_fn(model, batch, generator) -> (loss, logs)`: `loss` a scalar mean over the micro-batch, `logs` a
    mapping of extra scalar metrics (tensors or numbers; the names loss, lr, grad_norm, step, samples_seen are
    reserved). Each step: zero grads, backward over the `accumulate` micro-batches (loss weighted by
    micro-batch share), clip the global grad norm to `grad_clip` (None: no clipping), optimizer step,
    `lr_schedule.step()`, `ema.update(global batch)`. Every `log_every` steps the averaged metrics are
    all-reduced, appended to the history, logged and checked to be finite (`FloatingPointError` otherwise).
    The model is moved to `device` and wrapped in `DistributedDataParallel` when a process group is
    initialised; `generator` (seed it per rank, see `rank_generator`) feeds `data` and `loss_fn`.
    `model_kwargs`/`config` go into each checkpoint's config.json. See the module docstring for the data and
    resume contract.
    """
    if (steps is None) == (samples is None):
        raise ValueError("steps, samples: give exactly one training length (optimiser steps or samples seen)")
    if steps is not None:
        _positive_int(steps, "steps")
    if samples is not None:
        _positive_int(samples, "samples")
    if not isinstance(model, nn.Module):
        raise ValueError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    if not callable(loss_fn):
        raise ValueError("loss_fn: expected a callable loss_fn(model, batch, generator) -> (loss, logs)")
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise ValueError(f"optimizer: expected a torch.optim.Optimizer, got {type(optimizer).__name__}")
    if lr_schedule is not None and not (hasattr(lr_schedule, "step") and hasattr(lr_schedule, "state_dict")):
        raise ValueError("lr_schedule: expected a torch.optim.lr_scheduler.LRScheduler (with step and state_dict)")
    if ema is not None and not isinstance(ema, EMA):
        raise ValueError(f"ema: expected a flowlab.core.train.EMA, got {type(ema).__name__}")
    if grad_clip is not None and not (grad_clip > 0 and math.isfinite(grad_clip)):
        raise ValueError(f"grad_clip: expected a positive finite max norm or None, got {grad_clip}")
    _positive_int(accumulate, "accumulate")
    _positive_int(ckpt_every, "ckpt_every")
    _positive_int(log_every, "log_every")
    if not isinstance(generator, torch.Generator):
        raise ValueError(f"generator: expected a torch.Generator, got {type(generator).__name__}")
    if any(not callable(cb) for cb in callbacks):
        raise ValueError("callbacks: every callback must be callable as callback(step_info)")
    device = torch.device(device)
    info = dist_info()

    model.to(device)
    if ema is not None:
        ema.to(device)
    step, samples_seen, resumed_from, last_ckpt = 0, 0, None, None
    if ckpt_dir is not None and resume and (found := latest_checkpoint(ckpt_dir)) is not None:
        loaded = load_checkpoint(
            found,
            model=model,
            optimizer=optimizer,
            lr_schedule=lr_schedule,
            ema=ema,
            generator=generator,
            device=device,
        )
        step, samples_seen, resumed_from = loaded.step, loaded.samples_seen, loaded.path
        last_ckpt = loaded.path
        logger.info("resumed from %s at step %d (%d samples seen)", loaded.path, step, samples_seen)

    wrapped = model
    if is_distributed() and not isinstance(model, nn.parallel.DistributedDataParallel):
        ids = None
        if device.type == "cuda":
            ids = [device.index if device.index is not None else torch.cuda.current_device()]
        wrapped = nn.parallel.DistributedDataParallel(model, device_ids=ids)
    ddp = isinstance(wrapped, nn.parallel.DistributedDataParallel)
    plain = unwrap_model(model)
    params = [p for p in plain.parameters() if p.requires_grad]
    log_dtype = torch.float32 if device.type == "mps" else torch.float64

    def done() -> bool:
        return step >= steps if steps is not None else samples_seen >= samples

    def checkpoint() -> Path:
        return save_checkpoint(
            ckpt_dir,
            model=model,
            step=step,
            samples_seen=samples_seen,
            optimizer=optimizer,
            lr_schedule=lr_schedule,
            ema=ema,
            generator=generator,
            model_kwargs=model_kwargs,
            config=config,
        )

    stream = _batches(data, generator, step)
    history: list[dict[str, float]] = []
    last_logs: dict[str, float] = {}
    keys: list[str] | None = None
    sums: torch.Tensor | None = None  # [loss, grad_norm, *user logs, local samples] summed since the last log
    steps_since_log = 0
    was_training = model.training
    wrapped.train()
    bar = tqdm(
        total=steps if steps is not None else samples,
        initial=min(step if steps is not None else samples_seen, steps or samples),
        unit="step" if steps is not None else "sample",
        disable=not (progress and info.is_main),
        dynamic_ncols=True,
    )
    try:
        while not done():
            try:
                batch = next(stream)
            except StopIteration:
                raise ValueError(f"data: the iterator ran out of batches at step {step}") from None
            batch = _map_batch(lambda t: t.to(device, non_blocking=True), batch)
            size = _batch_size(batch)
            optimizer.zero_grad(set_to_none=True)
            micro = _micro_batches(batch, accumulate, size)
            step_vals: torch.Tensor | None = None
            for i, (mb, n) in enumerate(micro):
                sync = wrapped.no_sync() if ddp and i < len(micro) - 1 else nullcontext()
                with sync:
                    out = loss_fn(wrapped, mb, generator)
                    if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], Mapping)):
                        raise ValueError("loss_fn: expected to return (loss, logs) with logs a mapping")
                    loss, logs = out
                    if not (isinstance(loss, torch.Tensor) and loss.dim() == 0):
                        raise ValueError("loss_fn: loss must be a scalar (0-d) tensor")
                    (loss * (n / size)).backward()
                if keys is None:
                    keys = sorted(logs)
                    if clash := [k for k in keys if k in _RESERVED]:
                        raise ValueError(f"loss_fn: log names {clash} are reserved; rename them")
                elif sorted(logs) != keys:
                    raise ValueError(f"loss_fn: log names changed from {keys} to {sorted(logs)}")
                vals = torch.stack(
                    [_scalar(loss, device, log_dtype, "loss")]
                    + [_scalar(logs[k], device, log_dtype, f"loss_fn: logs[{k!r}]") for k in keys]
                ) * (n / size)
                step_vals = vals if step_vals is None else step_vals + vals
            if grad_clip is not None:
                grad_norm = torch.nn.utils.clip_grad_norm_(params, grad_clip).detach().to(log_dtype)
            else:
                grad_norm = torch.zeros((), device=device, dtype=log_dtype)
            optimizer.step()
            if lr_schedule is not None:
                lr_schedule.step()
            global_batch = size * info.world_size
            step += 1
            samples_seen += global_batch
            if ema is not None:
                ema.update(global_batch)

            extra = torch.tensor([size], device=device, dtype=log_dtype)
            row = torch.cat([step_vals[:1], grad_norm.reshape(1), step_vals[1:], extra])
            sums = row if sums is None else sums + row
            steps_since_log += 1
            logged = None
            if step % log_every == 0 or done():
                logged = _reduce_logs(sums, keys, steps_since_log, info.world_size, grad_clip is not None)
                logged = {
                    "step": step,
                    "samples_seen": samples_seen,
                    "lr": float(optimizer.param_groups[0]["lr"]),
                    **logged,
                }
                sums, steps_since_log = None, 0
                history.append(logged)
                last_logs = logged
                if info.is_main:
                    logger.info(
                        " | ".join(f"{k} {v:.6g}" if isinstance(v, float) else f"{k} {v}" for k, v in logged.items())
                    )
                bar.set_postfix(loss=f"{logged['loss']:.4g}", refresh=False)
            bar.update(1 if steps is not None else min(global_batch, samples - bar.n))

            # callbacks first: what they change in the model (a Polyak target, say) belongs in this step's checkpoint
            for cb in callbacks:
                cb(StepInfo(step, samples_seen, logged, model=plain, ema=ema, is_main=info.is_main))
            if ckpt_dir is not None and (step % ckpt_every == 0 or done()):
                last_ckpt = checkpoint()
    finally:
        bar.close()
        model.train(was_training)
    return FitResult(
        steps=step,
        samples_seen=samples_seen,
        logs=last_logs,
        history=tuple(history),
        checkpoint=last_ckpt,
        resumed_from=resumed_from,
    )


def _reduce_logs(sums: torch.Tensor, keys: list[str], count: int, world_size: int, clipped: bool) -> dict[str, float]:
    """All-reduce the metric sums, check every rank saw as many samples, and average over steps and ranks."""
    # With L_r the samples rank r handled since the last log, W * sum(L_r^2) == (sum L_r)^2 iff all L_r are
    # equal; every rank sees the same sums, so all decide alike (no rank is left waiting in a collective).
    local = sums[-1:]
    *metrics, n, n2 = all_reduce_sum(torch.cat([sums, local * local])).tolist()
    if world_size > 1 and abs(world_size * n2 - n * n) > 0.5:
        raise ValueError("data: ranks supplied different batch sizes; each must supply an equal share of the batch")
    metrics = [m / (count * world_size) for m in metrics]
    out = {"loss": metrics[0]}
    if clipped:
        out["grad_norm"] = metrics[1]
    out.update(zip(keys, metrics[2:]))
    bad = [k for k, v in out.items() if not math.isfinite(v)]
    if bad:
        raise FloatingPointError(f"non-finite training metrics {bad} (averaged over the last {count} steps)")
    return out
