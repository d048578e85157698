"""Multi-layer perceptrons: a plain MLP, a time-conditioned vector field and its manifold version."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from flowlab.core.manifolds.base import Manifold
from flowlab.core.nets.embeddings import FourierFeatures, SinusoidalEmbedding, check_time_shape
from flowlab.core.validation import check_choice, check_tensor

__all__ = ["MLP", "ManifoldMLP", "TimeMLP", "activation", "zero_init"]

_ACTIVATIONS = {"silu": nn.SiLU, "relu": nn.ReLU, "gelu": nn.GELU, "tanh": nn.Tanh, "softplus": nn.Softplus}


def activation(name: str) -> nn.Module:
    """A fresh activation module by name: silu, relu, gelu, tanh or softplus."""
    return _ACTIVATIONS[check_choice(name, _ACTIVATIONS, "act")]()


def zero_init(module: nn.Module) -> nn.Module:
    """Set every parameter of `module` to zero in place and return it (output layers that start at 0)."""
    with torch.no_grad():
        for p in module.parameters():
            p.zero_()
    return module


def _check_hidden(hidden: Sequence[int]) -> tuple[int, ...]:
    hidden = tuple(hidden)
    if not all(isinstance(h, int) and h > 0 for h in hidden):
        raise ValueError(f"hidden: expected a sequence of positive integers, got {hidden!r}")
    return hidden


def _check_positive_int(value: int, name: str, *, allow_zero: bool = False) -> int:
    low = 0 if allow_zero else 1
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ValueError(f"{name}: expected an integer >= {low}, got {value!r}")
    return value


class MLP(nn.Module):
    """Linear -> [LayerNorm] -> act for each hidden width, then a linear output layer.

    x: (B, in_dim) -> (B, out_dim). `zero_out=True` starts the output layer at zero.
    """

    def __init__(
        self,
        in_dim: int,
        out_dim: int,
        hidden: Sequence[int] = (256,) * 4,
        act: str = "silu",
        layer_norm: bool = False,
        *,
        zero_out: bool = False,
    ) -> None:
        super().__init__()
        self.in_dim = _check_positive_int(in_dim, "in_dim")
        self.out_dim = _check_positive_int(out_dim, "out_dim")
        hidden = _check_hidden(hidden)
        activation(act)  # validates the name
        layers: list[nn.Module] = []
        width = in_dim
        for h in hidden:
            layers.append(nn.Linear(width, h))
            if layer_norm:
                layers.append(nn.LayerNorm(h))
            layers.append(activation(act))
            width = h
        self.out = nn.Linear(width, out_dim)
        if zero_out:
            zero_init(self.out)
        self.body = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (..., in_dim) -> (..., out_dim)."""
        check_tensor(x, "x", finite=False)
        if x.shape[-1] != self.in_dim:
            raise ValueError(f"x: expected last dimension {self.in_dim}, got shape {tuple(x.shape)}")
        return self.out(self.body(x))


class TimeMLP(nn.Module):
    """Vector field `net(x=x, t=t[, s=s][, cond=c]) -> (B, dim)`; x: (B, dim), t, s: (B,), cond: (B, C).

    The MLP sees [x, e(t)] (times=1) or [x, e(s), e(t)] (times=2, a two-time flow-map network; the flow-map
    parametrisation, e.g. x + (t - s) * net, belongs to the caller), with e a sinusoidal embedding of
    `time_scale * t`, then the condition (C = cond_dim) when `cond_dim > 0`.
    """

    def __init__(
        self,
        dim: int,
        *,
        cond_dim: int = 0,
        times: int = 1,
        hidden: Sequence[int] = (256,) * 4,
        time_embed_dim: int = 64,
        act: str = "silu",
        layer_norm: bool = False,
        time_scale: float = 1000.0,
        zero_out: bool = False,
        out_dim: int | None = None,
    ) -> None:
        super().__init__()
        self.dim = _check_positive_int(dim, "dim")
        self.cond_dim = _check_positive_int(cond_dim, "cond_dim", allow_zero=True)
        if times not in (1, 2):
            raise ValueError(f"times: expected 1 (net(x, t)) or 2 (net(x, s, t)), got {times!r}")
        self.times = times
        self.out_dim = dim if out_dim is None else _check_positive_int(out_dim, "out_dim")
        self.embed = SinusoidalEmbedding(time_embed_dim, scale=time_scale)
        in_dim = self._feature_dim() + times * time_embed_dim + cond_dim
        self.mlp = MLP(in_dim, self.out_dim, hidden, act, layer_norm, zero_out=zero_out)

    def _feature_dim(self) -> int:
        return self.dim

    def _features(self, x: torch.Tensor) -> torch.Tensor:
        return x

    def forward(
        self,
        *,
        x: torch.Tensor,
        t: torch.Tensor,
        s: torch.Tensor | None = None,
        cond: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """x: (B, dim), t: (B,) -> (B, out_dim); s: (B,) is required when `times=2`, cond: (B, cond_dim) when
        `cond_dim > 0`."""
        check_tensor(x, "x", finite=False)
        if x.dim() != 2 or x.shape[1] != self.dim:
            raise ValueError(f"x: expected shape (B, {self.dim}), got {tuple(x.shape)}")
        batch = x.shape[0]
        check_time_shape(t, batch, "t")
        parts = [self._features(x)]
        if self.times == 2:
            if s is None:
                raise ValueError("s: required by a two-time network (times=2)")
            check_time_shape(s, batch, "s")
            parts.append(self.embed(s).to(x.dtype))
        elif s is not None:
            raise ValueError("s: given to a one-time network (times=1); build it with times=2")
        parts.append(self.embed(t).to(x.dtype))
        if self.cond_dim:
            if cond is None:
                raise ValueError(f"cond: required, expected shape ({batch}, {self.cond_dim})")
            if not isinstance(cond, torch.Tensor) or tuple(cond.shape) != (batch, self.cond_dim):
                shape = tuple(cond.shape) if isinstance(cond, torch.Tensor) else type(cond).__name__
                raise ValueError(f"cond: expected shape ({batch}, {self.cond_dim}), got {shape}")
            parts.append(cond.to(x.dtype))
        elif cond is not None:
            raise ValueError("cond: given to an unconditional network (cond_dim=0)")
        return self.mlp(torch.cat(parts, dim=-1))


class ManifoldMLP(TimeMLP):
    """A `TimeMLP` on a manifold: input embedding by the manifold, output projected to the tangent space at x.

    x: (B, ambient_dim) -> tangent vector (B, ambient_dim) = manifold.proju(x, mlp(...)). The input embedding
    is `manifold.input_features(x) -> (B, F)` when the manifold defines it (the flat torus maps angles to
    (cos, sin); the sphere keeps R^3), else the ambient coordinates. `fourier_dim > 0` appends random Fourier
    features of that embedding, `FourierFeatures(fourier_dim, fourier_scale, in_features=F)` (fixed frequencies
    drawn at construction): an MLP on raw coordinates is slow to learn densities concentrated on small scales.
    Other options as for `TimeMLP`.
    """

    def __init__(self, manifold: Manifold, *, fourier_dim: int = 0, fourier_scale: float = 1.0, **kwargs) -> None:
        if not isinstance(manifold, Manifold):
            raise ValueError(f"manifold: expected a flowlab.core Manifold, got {type(manifold).__name__}")
        if "out_dim" in kwargs:
            raise ValueError("out_dim: fixed to the manifold's ambient dimension for a ManifoldMLP")
        self.manifold = manifold
        self.fourier_dim = _check_positive_int(fourier_dim, "fourier_dim", allow_zero=True)
        super().__init__(manifold.ambient_dim, **kwargs)
        width = self._embedding_dim()
        self.fourier = FourierFeatures(fourier_dim, fourier_scale, in_features=width) if fourier_dim else None

    def _embedding_dim(self) -> int:
        hook = getattr(self.manifold, "input_features", None)
        if hook is None:
            return self.manifold.ambient_dim
        with torch.no_grad():  # the embedding's width, probed on one point (values are irrelevant)
            return int(hook(torch.zeros(1, self.manifold.ambient_dim)).shape[-1])

    def _feature_dim(self) -> int:
        return self._embedding_dim() + self.fourier_dim

    def _features(self, x: torch.Tensor) -> torch.Tensor:
        hook = getattr(self.manifold, "input_features", None)
        feats = x if hook is None else hook(x)
        return feats if self.fourier is None else torch.cat([feats, self.fourier(feats)], dim=-1)

    def forward(
        self,
        *,
        x: torch.Tensor,
        t: torch.Tensor,
        s: torch.Tensor | None = None,
        cond: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """As `TimeMLP.forward`, with the output projected onto the tangent space at x: (B, ambient_dim)."""
        return self.manifold.proju(x, super().forward(x=x, t=t, s=s, cond=cond))

    def extra_repr(self) -> str:
        """The manifold, for the module's repr."""
        return f"manifold={self.manifold!r}"
