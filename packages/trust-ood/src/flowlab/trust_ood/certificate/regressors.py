"""Regression models Psi(u0, param) -> u(T) over 1-D periodic fields: a small FNO and a 1-D CNN, both with dropout
(for the MC-dropout baseline), and their L1 training through `flowlab.core.train.fit`.

A regressor is called `model(x, param)` with x: (B, 1, N) and param: (B,) the task parameter (diffusivity or
viscosity), fed as a constant second input channel, and returns (B, 1, N).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from flowlab.core.train import fit

__all__ = ["CNN1d", "FNO1d", "SpectralConv1d", "predict", "train_regressor"]


def _check_inputs(x: torch.Tensor, param: torch.Tensor, length: int | None) -> None:
    if not isinstance(x, torch.Tensor) or x.dim() != 3 or x.shape[1] != 1:
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"x: expected shape (B, 1, N), got {shape}")
    if length is not None and x.shape[2] != length:
        raise ValueError(f"x: expected grid size {length}, got {x.shape[2]}")
    if not isinstance(param, torch.Tensor) or param.shape != (x.shape[0],):
        shape = tuple(param.shape) if isinstance(param, torch.Tensor) else type(param).__name__
        raise ValueError(f"param: expected shape ({x.shape[0]},), got {shape}")


class SpectralConv1d(nn.Module):
    """Multiply the lowest `modes` Fourier coefficients by learned complex (in, out) matrices."""

    def __init__(self, channels: int, modes: int) -> None:
        super().__init__()
        self.modes = modes
        scale = 1.0 / channels
        self.weight = nn.Parameter(scale * torch.randn(channels, channels, modes, 2))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """h: (B, in, n) -> (B, out, n), the lowest `modes` Fourier coefficients mixed by the learned weights and the
        rest zeroed."""
        n = h.shape[-1]
        h_hat = torch.fft.rfft(h, dim=-1)
        m = min(self.modes, h_hat.shape[-1])
        w = torch.view_as_complex(self.weight[..., :m, :].contiguous())
        out = torch.zeros_like(h_hat)
        out[..., :m] = torch.einsum("bim,iom->bom", h_hat[..., :m], w)
        return torch.fft.irfft(out, n=n, dim=-1)


class FNO1d(nn.Module):
    """Fourier neural operator (Li et al. 2021): lift, `layers` x (spectral conv + 1x1 conv, GELU), project.

    Input channels: the field, the task parameter and the grid coordinate."""

    def __init__(self, *, modes: int = 16, width: int = 32, layers: int = 4, dropout: float = 0.1) -> None:
        super().__init__()
        if modes < 1 or width < 1 or layers < 1 or not 0 <= dropout < 1:
            raise ValueError(f"modes, width, layers, dropout: got {modes}, {width}, {layers}, {dropout}")
        self.config = {"modes": modes, "width": width, "layers": layers, "dropout": dropout}
        self.lift = nn.Conv1d(3, width, 1)
        self.spectral = nn.ModuleList([SpectralConv1d(width, modes) for _ in range(layers)])
        self.pointwise = nn.ModuleList([nn.Conv1d(width, width, 1) for _ in range(layers)])
        self.dropout = nn.Dropout(dropout)
        self.project = nn.Sequential(nn.Conv1d(width, 2 * width, 1), nn.GELU(), nn.Conv1d(2 * width, 1, 1))

    def forward(self, x: torch.Tensor, param: torch.Tensor) -> torch.Tensor:
        """x: (B, 1, n), param: (B,) -> the predicted field (B, 1, n)."""
        _check_inputs(x, param, None)
        n = x.shape[-1]
        coord = torch.linspace(0, 1, n + 1, device=x.device, dtype=x.dtype)[:n].expand(x.shape[0], 1, n)
        h = self.lift(torch.cat([x, param[:, None, None].expand(-1, 1, n), coord], dim=1))
        for i, (spec, pw) in enumerate(zip(self.spectral, self.pointwise, strict=True)):
            h = spec(h) + pw(h)
            if i < len(self.spectral) - 1:
                h = self.dropout(F.gelu(h))
        return self.project(h)


class CNN1d(nn.Module):
    """Residual 1-D CNN with circular padding (periodic domain): `layers` x (conv k=5, GELU, dropout)."""

    def __init__(self, *, width: int = 32, layers: int = 4, kernel: int = 5, dropout: float = 0.1) -> None:
        super().__init__()
        if width < 1 or layers < 1 or kernel % 2 == 0 or not 0 <= dropout < 1:
            raise ValueError(f"width, layers, kernel (odd), dropout: got {width}, {layers}, {kernel}, {dropout}")
        self.config = {"width": width, "layers": layers, "kernel": kernel, "dropout": dropout}
        self.lift = nn.Conv1d(2, width, kernel, padding=kernel // 2, padding_mode="circular")
        self.blocks = nn.ModuleList(
            [nn.Conv1d(width, width, kernel, padding=kernel // 2, padding_mode="circular") for _ in range(layers)]
        )
        self.dropout = nn.Dropout(dropout)
        self.project = nn.Conv1d(width, 1, 1)

    def forward(self, x: torch.Tensor, param: torch.Tensor) -> torch.Tensor:
        """x: (B, 1, n), param: (B,) -> the predicted field (B, 1, n)."""
        _check_inputs(x, param, None)
        h = self.lift(torch.cat([x, param[:, None, None].expand(-1, 1, x.shape[-1])], dim=1))
        for blk in self.blocks:
            h = h + self.dropout(F.gelu(blk(h)))
        return self.project(h)


def predict(model: nn.Module, x: torch.Tensor, param: torch.Tensor, *, batch_size: int = 1024) -> torch.Tensor:
    """Deterministic (eval-mode) predictions of `model` in batches: x (B, 1, N), param (B,) -> (B, 1, N)."""
    _check_inputs(x, param, None)
    was = model.training
    model.eval()
    try:
        with torch.inference_mode():
            pairs = zip(x.split(batch_size), param.split(batch_size), strict=True)
            out = torch.cat([model(xb, pb) for xb, pb in pairs])
    finally:
        model.train(was)
    return out.clone()


def train_regressor(
    model: nn.Module,
    x: torch.Tensor,
    param: torch.Tensor,
    y: torch.Tensor,
    *,
    steps: int,
    batch_size: int = 64,
    lr: float = 2e-3,
    device: torch.device | str = "cpu",
    generator: torch.Generator,
    progress: bool = False,
) -> nn.Module:
    """Fit `model` to (x, param) -> y with the L1 loss (AdamW, cosine learning rate) through `core.train.fit`.

    x, y: (B, 1, N); param: (B,). Returns the model (trained in place)."""
    _check_inputs(x, param, None)
    if y.shape != x.shape:
        raise ValueError(f"y: expected shape {tuple(x.shape)}, got {tuple(y.shape)}")
    x, param, y = x.to(device), param.to(device), y.to(device)

    def data(step: int, g: torch.Generator):
        idx = torch.randint(0, x.shape[0], (batch_size,), generator=g).to(device)
        return x[idx], param[idx], y[idx]

    def loss_fn(net, batch, g):
        xb, pb, yb = batch
        return F.l1_loss(net(xb, pb), yb), {}

    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)
    fit(model, loss_fn, data, steps=steps, optimizer=opt, lr_schedule=sched, device=device, generator=generator,
        progress=progress, log_every=max(1, steps // 5))  # fmt: skip
    return model
