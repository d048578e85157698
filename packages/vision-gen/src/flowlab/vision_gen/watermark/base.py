"""Shared pieces of the latent watermarks: the protocol, result types, the analytic binomial threshold and key files.

A watermark key is saved as a folder holding `key.json` (format tag, method, version, config) and
`tensors.safetensors` (the key's tensors; no pickle). Loading checks the tag, the method and every tensor's shape
and raises ValueError naming what is wrong.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch
from scipy.special import betainc
from scipy.stats import binom

__all__ = [
    "KEY_FORMAT",
    "DetectionResult",
    "ExtractResult",
    "LatentWatermark",
    "binomial_threshold",
    "bits_tensor",
    "read_key_folder",
    "write_key_folder",
]

KEY_FORMAT = "flowlab.watermark.key"


@dataclass(frozen=True)
class ExtractResult:
    """bits: (B, l_m) decoded message bits (0/1, int64); copies: (B, N, l_m) the per-copy bits before the vote;
    votes: (B, l_m) fraction of copies voting 1."""

    bits: torch.Tensor
    copies: torch.Tensor
    votes: torch.Tensor

    def bit_accuracy(self, messages: torch.Tensor) -> torch.Tensor:
        """(B,) fraction of message bits recovered."""
        return (self.bits == bits_tensor(messages, self.bits.shape[-1], self.bits.device)).double().mean(-1)

    def raw_bit_error(self, messages: torch.Tensor) -> torch.Tensor:
        """(B,) fraction of per-copy bits that disagree with the message (error before the majority vote)."""
        m = bits_tensor(messages, self.bits.shape[-1], self.bits.device)
        return (self.copies != m[:, None, :]).double().mean((-1, -2))


@dataclass(frozen=True)
class DetectionResult:
    """matches: (B,) matching bits; threshold: tau with P(Bin(l_m, 1/2) >= tau) <= fpr; detected: (B,) bool;
    p_value: (B,) P(Bin(l_m, 1/2) >= matches) under the null (no watermark)."""

    matches: torch.Tensor
    threshold: int
    detected: torch.Tensor
    p_value: torch.Tensor


class LatentWatermark(Protocol):
    """What every latent watermark offers: `embed(messages) -> latents` of `latent_shape` that look like N(0, I),
    and `extract(latents) -> ExtractResult` (the bits read back)."""

    latent_shape: tuple[int, ...]

    def embed(self, messages: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """Watermarked initial latents `(B, *latent_shape)` that carry `messages`, distributed like N(0, I)."""

    def extract(self, latents: torch.Tensor) -> ExtractResult:
        """The message bits read back from recovered latents `(B, *latent_shape)`."""

    def detect(self, latents: torch.Tensor, message: torch.Tensor, *, fpr: float = 0.01) -> DetectionResult:
        """Whether each latent carries `message`, at false-positive rate `fpr`."""


def binomial_threshold(n_bits: int, fpr: float) -> int:
    """tau = min{k : P(Bin(n_bits, 1/2) >= k) <= fpr}, from the regularised incomplete beta function.

    P(Bin(n, p) >= k) = I_p(k, n - k + 1) for 1 <= k <= n; n_bits + 1 when even all-match is too likely.
    """
    if not (isinstance(n_bits, int) and n_bits >= 1):
        raise ValueError(f"n_bits: expected a positive integer, got {n_bits!r}")
    if not (0 < fpr < 1):
        raise ValueError(f"fpr: expected a rate in (0, 1), got {fpr!r}")
    for k in range(1, n_bits + 1):
        if betainc(k, n_bits - k + 1, 0.5) <= fpr:
            return k
    return n_bits + 1


def binomial_detection(matches: torch.Tensor, n_bits: int, fpr: float) -> DetectionResult:
    tau = binomial_threshold(n_bits, fpr)
    p = torch.as_tensor(binom.sf(matches.cpu().numpy() - 1, n_bits, 0.5), dtype=torch.float64)
    return DetectionResult(matches=matches, threshold=tau, detected=matches >= tau, p_value=p)


def bits_tensor(messages: torch.Tensor, n_bits: int, device: torch.device | None = None) -> torch.Tensor:
    """Validate a (B, n_bits) 0/1 message tensor (bool, int or float) and return it as int64 on `device`."""
    if not isinstance(messages, torch.Tensor) or messages.dim() != 2:
        raise ValueError(f"messages: expected a (B, {n_bits}) tensor of bits")
    if messages.shape[1] != n_bits:
        raise ValueError(f"messages: expected {n_bits} bits per message (the key's capacity), got {messages.shape[1]}")
    m = messages.to(device=device if device is not None else messages.device)
    if m.dtype == torch.bool:
        return m.long()
    if not bool(((m == 0) | (m == 1)).all()):
        raise ValueError("messages: expected bits (0 or 1)")
    return m.long()


def check_latents(latents: torch.Tensor, latent_shape: tuple[int, ...]) -> torch.Tensor:
    """(B, *latent_shape) -> (B, l_x) after validation."""
    if not isinstance(latents, torch.Tensor) or tuple(latents.shape[1:]) != tuple(latent_shape):
        got = tuple(latents.shape) if isinstance(latents, torch.Tensor) else type(latents).__name__
        raise ValueError(f"latents: expected shape (B, {', '.join(map(str, latent_shape))}), got {got}")
    if not bool(torch.isfinite(latents).all()):
        raise ValueError("latents: contains NaN or inf")
    return latents.reshape(latents.shape[0], math.prod(latent_shape))


def write_key_folder(path: str | os.PathLike, method: str, config: dict[str, Any], tensors: dict) -> Path:
    """Write a key folder (key.json: format, version, method, config; tensors.safetensors) at `path` -> the folder."""
    from safetensors.torch import save_file

    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    meta = {"format": KEY_FORMAT, "version": 1, "method": method, "config": config}
    (folder / "key.json").write_text(json.dumps(meta, indent=2))
    save_file({k: v.contiguous().cpu() for k, v in tensors.items()}, str(folder / "tensors.safetensors"))
    return folder


def read_key_folder(path: str | os.PathLike) -> tuple[str, dict[str, Any], dict[str, torch.Tensor]]:
    """(method, config, tensors) of a key folder; ValueError when the folder is not a FlowLab watermark key."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    folder = Path(path)
    if not (folder / "key.json").is_file() or not (folder / "tensors.safetensors").is_file():
        raise FileNotFoundError(f"key: {folder} lacks key.json or tensors.safetensors (not a watermark key folder)")
    try:
        meta = json.loads((folder / "key.json").read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"key: {folder / 'key.json'} is not valid JSON ({err})") from err
    if not isinstance(meta, dict) or meta.get("format") != KEY_FORMAT or meta.get("version") != 1:
        raise ValueError(f"key: {folder / 'key.json'} is not a version-1 {KEY_FORMAT} file")
    if not isinstance(meta.get("method"), str) or not isinstance(meta.get("config"), dict):
        raise ValueError(f"key: {folder / 'key.json'} lacks 'method' or 'config'")
    try:
        tensors = load_file(str(folder / "tensors.safetensors"))
    except (SafetensorError, OSError, RuntimeError) as err:
        raise ValueError(f"key: {folder / 'tensors.safetensors'} is corrupted ({err})") from err
    return meta["method"], meta["config"], tensors


def check_key_tensor(tensors: dict, name: str, shape: tuple[int, ...]) -> torch.Tensor:
    t = tensors.get(name)
    if t is None:
        raise ValueError(f"key: tensor {name!r} is missing")
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"key: tensor {name!r} has shape {tuple(t.shape)}, the config implies {tuple(shape)}")
    return t
