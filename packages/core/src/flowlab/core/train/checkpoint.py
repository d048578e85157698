"""Checkpoints: one folder per save, `<ckpt_dir>/step-000001000/` holding `weights.pt` and `config.json`.

`weights.pt` holds tensors, numbers and strings only: the state_dicts of the model, EMA, optimizer and LR
schedule, the RNG states (torch's CPU generator, the CUDA generator of the model's device when it is a GPU,
and the training generator; one entry per rank under DDP) as uint8 tensors, `step` and `samples_seen`. It is
read back with `torch.load(path, map_location=device, weights_only=True)` and nothing else, so no class is
ever unpickled. `config.json` records class names, constructor kwargs when given, package versions, the git
SHA when available and the samples seen. A save writes a hidden temporary folder and renames it into place, so
a crash never leaves a half-written checkpoint where `latest_checkpoint` would find it.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import pickle
import platform
import re
import shutil
import subprocess
import tempfile
import warnings
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import torch
from torch import nn

from flowlab.core.train.distributed import all_gather_tensor, dist_info, unwrap_model
from flowlab.core.train.ema import EMA

__all__ = [
    "LoadedCheckpoint", "cpu_state_dict", "latest_checkpoint", "load_checkpoint", "load_weights", "save_checkpoint"
]  # fmt: skip

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
WEIGHTS, CONFIG = "weights.pt", "config.json"
_STEP_DIR = re.compile(r"^step-(\d+)$")


@dataclass(frozen=True)
class LoadedCheckpoint:
    """What `load_checkpoint` restored: the checkpoint folder, its step and samples seen, and its
    `config.json`."""

    path: Path
    step: int
    samples_seen: int
    config: Mapping[str, Any]


def _qualname(obj: object) -> str:
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


@functools.cache
def _git_sha() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=os.getcwd(),
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    sha = out.stdout.strip()
    return sha if out.returncode == 0 and re.fullmatch(r"[0-9a-f]{40}", sha) else None


def _versions() -> dict[str, str]:
    versions = {"python": platform.python_version(), "torch": torch.__version__}
    with contextlib.suppress(metadata.PackageNotFoundError):
        versions["flowlab-core"] = metadata.version("flowlab-core")
    return versions


def _json_or_error(value: Any, name: str) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name}: must be JSON-serialisable to go into {CONFIG} ({err})") from None
    return value


def _model_device(model: nn.Module) -> torch.device:
    for t in (*model.parameters(), *model.buffers()):
        return t.device
    return torch.device("cpu")


def cpu_state_dict(module: nn.Module) -> dict[str, torch.Tensor]:
    """The module's state_dict with every tensor on the CPU (and no autograd history): what `torch.save` writes, or
    what one process hands another, whatever device the module trained on."""
    return {name: t.detach().cpu() for name, t in module.state_dict().items()}


def latest_checkpoint(ckpt_dir: str | os.PathLike[str]) -> Path | None:
    """The complete `step-*` folder with the highest step under `ckpt_dir`, or None when there is none."""
    root = Path(ckpt_dir)
    if not root.is_dir():
        return None
    found = []
    for child in root.iterdir():
        match = _STEP_DIR.match(child.name)
        if match and (child / WEIGHTS).is_file() and (child / CONFIG).is_file():
            found.append((int(match.group(1)), child))
    return max(found)[1] if found else None


def save_checkpoint(
    ckpt_dir: str | os.PathLike[str],
    *,
    model: nn.Module,
    step: int,
    samples_seen: int,
    optimizer: torch.optim.Optimizer | None = None,
    lr_schedule: torch.optim.lr_scheduler.LRScheduler | None = None,
    ema: EMA | None = None,
    generator: torch.Generator | None = None,
    model_kwargs: Mapping[str, Any] | None = None,
    config: Mapping[str, Any] | None = None,
) -> Path:
    """Write `<ckpt_dir>/step-<step:09d>/{weights.pt, config.json}` atomically and return that folder.

    Under DDP every rank must call this (the RNG states are gathered from all ranks); only rank 0 writes.
    `model_kwargs` (the model's constructor arguments) and `config` (any run settings) must be
    JSON-serialisable.
    """
    if not isinstance(step, int) or step < 0:
        raise ValueError(f"step: expected a non-negative int, got {step!r}")
    if not isinstance(samples_seen, int) or samples_seen < 0:
        raise ValueError(f"samples_seen: expected a non-negative int, got {samples_seen!r}")
    if model_kwargs is not None:
        model_kwargs = _json_or_error(dict(model_kwargs), "model_kwargs")
    if config is not None:
        config = _json_or_error(dict(config), "config")
    plain = unwrap_model(model)
    device = _model_device(plain)
    rng: dict[str, list[torch.Tensor]] = {"torch_cpu": all_gather_tensor(torch.get_rng_state())}
    if device.type == "cuda":
        rng["torch_cuda"] = all_gather_tensor(torch.cuda.get_rng_state(device))
    if generator is not None:
        rng["generator"] = all_gather_tensor(generator.get_state())

    info = dist_info()
    final = Path(ckpt_dir) / f"step-{step:09d}"
    if not info.is_main:
        return final
    weights: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "step": step,
        "samples_seen": samples_seen,
        "world_size": info.world_size,
        "model": plain.state_dict(),
        "rng": rng,
    }
    meta: dict[str, Any] = {
        "format": "flowlab-checkpoint",
        "format_version": FORMAT_VERSION,
        "step": step,
        "samples_seen": samples_seen,
        "world_size": info.world_size,
        "model": {"class": _qualname(plain), "kwargs": model_kwargs},
        "versions": _versions(),
        "git_sha": _git_sha(),
        "config": config,
    }
    for key, obj in (("optimizer", optimizer), ("lr_schedule", lr_schedule), ("ema", ema)):
        if obj is not None:
            weights[key] = obj.state_dict()
            meta[key] = {"class": _qualname(obj)}
    if ema is not None:
        meta["ema"].update(decay=ema.decay, half_life_samples=ema.half_life_samples, warmup_steps=ema.warmup_steps)

    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{final.name}-", dir=final.parent))
    try:
        with open(tmp / WEIGHTS, "wb") as f:
            torch.save(weights, f)
            f.flush()
            os.fsync(f.fileno())
        (tmp / CONFIG).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
        if final.exists():  # re-saving a step: move the old folder aside first, then drop it
            old = Path(tempfile.mkdtemp(prefix=f".old-{final.name}-", dir=final.parent))
            os.replace(final, old / final.name)
            os.replace(tmp, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    logger.info("saved checkpoint %s (step %d, %d samples seen)", final, step, samples_seen)
    return final


def _resolve(path: str | os.PathLike[str]) -> Path:
    path = Path(path)
    if (path / WEIGHTS).is_file():
        return path
    latest = latest_checkpoint(path)
    if latest is None:
        raise FileNotFoundError(f"path: no checkpoint at {path} (expected {WEIGHTS} or step-* folders holding one)")
    return latest


def load_weights(path: str | os.PathLike[str], *, map_location: Any = None, name: str = "path") -> Any:
    """`torch.load(path, map_location=..., weights_only=True)` with every failure one ValueError naming `name`: a
    missing file, an empty or corrupt one, or one holding objects other than tensors, numbers and containers (which
    would need `weights_only=False`: never used here, and never advised)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{name}: {path} not found")
    try:
        with warnings.catch_warnings():  # torch's note on a foreign pickle protocol, before the refusal below
            warnings.filterwarnings("ignore", message="Detected pickle protocol", category=UserWarning)
            return torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError:
        raise ValueError(
            f"{name}: {path} is corrupt or holds objects other than tensors; only plain weights are loaded"
        ) from None
    except (EOFError, RuntimeError, OSError, ValueError, zipfile.BadZipFile) as err:
        raise ValueError(
            f"{name}: {path} is empty or corrupt, not a torch weights file ({type(err).__name__})"
        ) from None


def _restore(obj: Any, state: Any, folder: Path, key: str) -> None:
    """`obj.load_state_dict(state)`, a state of another shape or network as one ValueError naming the checkpoint."""
    try:
        obj.load_state_dict(state)
    except (RuntimeError, KeyError, ValueError, TypeError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(f"path: the {key} state in {folder / WEIGHTS} does not fit this {key} ({first})") from None


def load_checkpoint(
    path: str | os.PathLike[str],
    *,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    lr_schedule: torch.optim.lr_scheduler.LRScheduler | None = None,
    ema: EMA | None = None,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
    restore_rng: bool = True,
) -> LoadedCheckpoint:
    """Restore everything given from a checkpoint folder (or the latest one under a `ckpt_dir`).

    Tensors are mapped to `device` (default: the model's device). With `restore_rng`, torch's CPU (and CUDA)
    RNG and `generator` get this rank's saved states; if the world size changed they are left alone (logged as
    a warning).
    """
    folder = _resolve(path)
    plain = unwrap_model(model)
    device = _model_device(plain) if device is None else torch.device(device)
    state = load_weights(folder / WEIGHTS, map_location=device)
    if not isinstance(state, Mapping) or state.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"path: {folder / WEIGHTS} is not a FlowLab checkpoint of format {FORMAT_VERSION}")
    config_path = folder / CONFIG
    try:
        config = json.loads(config_path.read_text()) if config_path.is_file() else {}
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ValueError(f"path: {config_path} is corrupt, not JSON") from None
    bad = [k for k, v in state["model"].items() if torch.is_floating_point(v) and not torch.isfinite(v).all()]
    if bad:
        raise ValueError(f"path: {folder / WEIGHTS} holds non-finite weights ({', '.join(bad[:3])}): a diverged run")

    _restore(plain, state["model"], folder, "model")
    for key, obj in (("optimizer", optimizer), ("lr_schedule", lr_schedule), ("ema", ema)):
        if obj is None:
            continue
        if key not in state:
            raise ValueError(f"{key}: the checkpoint {folder} holds no {key} state to restore")
        _restore(obj, state[key], folder, key)
    if ema is not None:
        ema.to(device)

    if restore_rng:
        info, rng = dist_info(), state["rng"]
        if len(rng["torch_cpu"]) != info.world_size:
            logger.warning(
                "checkpoint %s was saved by %d ranks, this run has %d: RNG states not restored",
                folder,
                len(rng["torch_cpu"]),
                info.world_size,
            )
        else:
            torch.set_rng_state(rng["torch_cpu"][info.rank].cpu())
            if "torch_cuda" in rng and device.type == "cuda":
                torch.cuda.set_rng_state(rng["torch_cuda"][info.rank].cpu(), device)
            if generator is not None:
                if "generator" not in rng:
                    raise ValueError(f"generator: the checkpoint {folder} holds no generator state")
                try:
                    generator.set_state(rng["generator"][info.rank].cpu())
                except RuntimeError as err:
                    raise ValueError(f"generator: saved state does not fit this generator ({err})") from None
    return LoadedCheckpoint(
        path=folder, step=int(state["step"]), samples_seen=int(state["samples_seen"]), config=config
    )
