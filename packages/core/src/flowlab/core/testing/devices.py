"""Devices a test can run on: always the CPU, plus CUDA when one is present."""

from __future__ import annotations

import torch


def available_devices() -> list[torch.device]:
    """CPU first, then every visible CUDA device."""
    devices = [torch.device("cpu")]
    if torch.cuda.is_available():
        devices.append(torch.device("cuda"))
    return devices
