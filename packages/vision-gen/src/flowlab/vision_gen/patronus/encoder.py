"""The encoders that turn a clean image into the condition vector: Patronus's prototype encoder (a ProtoPNet-style
conv stack whose patch features are compared with m learned prototypes) and the DiffAE-style global encoder (the
same conv stack flattened to one m-dimensional code).

Activation of prototype j (the official `basic_conv` head): with z_u the feature of cell u,

    d2_{j,u} = relu(|z_u|^2 - 2 z_u . p_j + |p_j|^2)     (one 1x1 convolution; relu removes negative round-off)
    d2_j = min_u d2_{j,u},   s_j = log((d2_j + 1) / (d2_j + eps))

so s_j >= 0, decreasing in d2_j, and log(1 / eps) (9.21 at eps = 1e-4) where a cell equals p_j.

Receptive field of a cell (conv arithmetic, layer l with kernel k_l, stride s_l, padding p_l, jump J_l =
s_1 ... s_l): cell u of the last layer sees the input rows u J_L - P ... u J_L - P + R - 1, clipped to the image,
with R = 1 + sum_l (k_l - 1) J_{l-1} and P = sum_l p_l J_{l-1}.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from flowlab.core.validation import check_tensor

__all__ = ["GlobalEncoder", "PrototypeEncoder", "PrototypeOutput", "activation", "conv_stack", "receptive_field"]


def activation(d2: torch.Tensor, eps: float = 1e-4) -> torch.Tensor:
    """s = log((d2 + 1) / (d2 + eps)) elementwise, for squared distances d2 >= 0."""
    return torch.log((d2 + 1) / (d2 + eps))


def conv_stack(in_channels: int, channels: Sequence[int], kernels: Sequence[int], strides: Sequence[int],
               paddings: Sequence[int]) -> nn.Sequential:  # fmt: skip
    """Conv + ReLU per entry of `channels`, weights drawn from N(0, 0.1^2) and zero biases (the official init)."""
    layers: list[nn.Module] = []
    width = in_channels
    for c, k, s, p in zip(channels, kernels, strides, paddings, strict=True):
        conv = nn.Conv2d(width, c, k, stride=s, padding=p)
        nn.init.normal_(conv.weight, std=0.1)
        nn.init.zeros_(conv.bias)
        layers += [conv, nn.ReLU()]
        width = c
    return nn.Sequential(*layers)


def receptive_field(
    image_size: int, kernels: Sequence[int], strides: Sequence[int], paddings: Sequence[int]
) -> tuple[int, int, int, int]:
    """(cells, size, jump, offset) of the conv stack on an image_size^2 input: cells per side of the last layer,
    the receptive field's side R, the jump J (input pixels between neighbouring cells) and the padding offset P, so
    that cell u sees input pixels u J - P ... u J - P + R - 1 (before clipping to the image)."""
    n, size, jump, offset = image_size, 1, 1, 0
    for k, s, p in zip(kernels, strides, paddings, strict=True):
        n = (n + 2 * p - k) // s + 1
        size += (k - 1) * jump
        offset += p * jump
        jump *= s
    return n, size, jump, offset


@dataclass(frozen=True)
class PrototypeOutput:
    """s: (B, m) activations; d2_min: (B, m) squared distance of each prototype to its closest cell; argmin_cell:
    (B, m) that cell's flat index (row-major over the H' x W' grid); d2_map: (B, m, H', W') every distance."""

    s: torch.Tensor
    d2_min: torch.Tensor
    argmin_cell: torch.Tensor
    d2_map: torch.Tensor


def _check_images(x: object, in_channels: int, image_size: int) -> torch.Tensor:
    check_tensor(x, "x")
    if x.dim() != 4 or tuple(x.shape[1:]) != (in_channels, image_size, image_size):
        raise ValueError(f"x: expected (B, {in_channels}, {image_size}, {image_size}), got {tuple(x.shape)}")
    return x


class PrototypeEncoder(nn.Module):
    """f: a conv stack to patch features z (B, D, H', W') and `num_prototypes` prototypes p_j in R^D (init U(0, 1));
    forward(x: (B, C, S, S)) -> `PrototypeOutput` (see the module docstring for the activation)."""

    def __init__(
        self, in_channels: int, image_size: int, *, channels: Sequence[int] = (32, 64, 64, 128),
        kernels: Sequence[int] = (3, 3, 3, 3), strides: Sequence[int] = (2, 1, 1, 1),
        paddings: Sequence[int] = (1, 0, 0, 0), num_prototypes: int = 30, eps: float = 1e-4,
    ) -> None:  # fmt: skip
        super().__init__()
        if not len(channels) == len(kernels) == len(strides) == len(paddings) >= 1:
            raise ValueError("channels, kernels, strides, paddings: expected sequences of one equal length >= 1")
        self.in_channels, self.image_size, self.eps = in_channels, image_size, eps
        self.cells, self.rf_size, self.rf_jump, self.rf_offset = receptive_field(image_size, kernels, strides,
                                                                                 paddings)  # fmt: skip
        if self.cells < 1:
            raise ValueError(f"kernels, strides, paddings: the conv stack leaves no cell of a {image_size}px image")
        self.features = conv_stack(in_channels, channels, kernels, strides, paddings)
        self.prototypes = nn.Parameter(torch.rand(num_prototypes, channels[-1]))

    @property
    def num_prototypes(self) -> int:
        """m, the number of prototypes."""
        return self.prototypes.shape[0]

    def init_from_patches(self, images: torch.Tensor, generator: torch.Generator) -> None:
        """Set each prototype to the feature of a random cell of a random image of images (N, C, S, S), drawn with
        `generator` (a data-dependent start instead of U(0, 1); see the README's deviations)."""
        with torch.no_grad():
            z = self.features(_check_images(images, self.in_channels, self.image_size)).flatten(2)  # (N, D, cells)
            m = self.num_prototypes
            rows = torch.randint(0, z.shape[0], (m,), generator=generator).to(z.device)
            cells = torch.randint(0, z.shape[2], (m,), generator=generator).to(z.device)
            self.prototypes.copy_(z[rows, :, cells])

    def distances(self, z: torch.Tensor) -> torch.Tensor:
        """z: (B, D, H', W') -> d2: (B, m, H', W'), |z_u - p_j|^2 through a 1x1 convolution (ReLU-clipped at 0)."""
        p = self.prototypes
        cross = F.conv2d(z, p[:, :, None, None])
        return F.relu(z.square().sum(1, keepdim=True) - 2 * cross + p.square().sum(1)[None, :, None, None])

    def forward(self, x: torch.Tensor) -> PrototypeOutput:
        """x: (B, C, S, S) -> the activations of every prototype and where they come from."""
        d2 = self.distances(self.features(_check_images(x, self.in_channels, self.image_size)))
        d2_min, cell = d2.flatten(2).min(2)
        return PrototypeOutput(activation(d2_min, self.eps), d2_min, cell, d2)

    def receptive_field(self, cell: tuple[int, int]) -> tuple[slice, slice]:
        """The input rows and columns (clipped to the image) that cell (row, col) of the feature grid sees."""
        row, col = cell
        if not (0 <= row < self.cells and 0 <= col < self.cells):
            raise ValueError(f"cell: expected (row, col) in [0, {self.cells})^2, got {cell}")
        return self._span(row), self._span(col)

    def _span(self, u: int) -> slice:
        start = u * self.rf_jump - self.rf_offset
        return slice(max(start, 0), min(start + self.rf_size, self.image_size))

    def receptive_masks(self) -> torch.Tensor:
        """(H' W', S, S) bool: the receptive field of every cell, row-major like `argmin_cell`."""
        masks = torch.zeros(self.cells, self.cells, self.image_size, self.image_size, dtype=torch.bool)
        for row in range(self.cells):
            for col in range(self.cells):
                rows, cols = self.receptive_field((row, col))
                masks[row, col, rows, cols] = True
        return masks.flatten(0, 1).to(self.prototypes.device)

    def distinct_loss(self, margin: float = 0.2) -> torch.Tensor:
        """mean_i relu(margin - min_{j != i} (1 - |cos(p_i, p_j)|)): pushes each prototype's nearest neighbour in
        |cosine| at least `margin` away (the official optional loss)."""
        p = F.normalize(self.prototypes, dim=1)
        gap = 1 - (p @ p.T).abs() + 2 * torch.eye(p.shape[0], device=p.device)
        return F.relu(margin - gap.min(1).values).mean()

    def prototype_cosines(self) -> torch.Tensor:
        """(m (m - 1) / 2,) the cosine similarity of every pair of prototypes."""
        p = F.normalize(self.prototypes.detach(), dim=1)
        i, j = torch.triu_indices(p.shape[0], p.shape[0], offset=1)
        return (p @ p.T)[i, j]


class GlobalEncoder(nn.Module):
    """The DiffAE-style baseline: the same conv stack, flattened, then a linear map to one `dim`-vector;
    forward(x: (B, C, S, S)) -> (B, dim)."""

    def __init__(
        self, in_channels: int, image_size: int, *, channels: Sequence[int], kernels: Sequence[int],
        strides: Sequence[int], paddings: Sequence[int], dim: int,
    ) -> None:  # fmt: skip
        super().__init__()
        self.in_channels, self.image_size = in_channels, image_size
        cells = receptive_field(image_size, kernels, strides, paddings)[0]
        self.features = conv_stack(in_channels, channels, kernels, strides, paddings)
        self.out = nn.Linear(channels[-1] * cells * cells, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, C, S, S) -> the code (B, dim)."""
        return self.out(self.features(_check_images(x, self.in_channels, self.image_size)).flatten(1))
