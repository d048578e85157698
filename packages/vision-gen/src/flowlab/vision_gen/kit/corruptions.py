"""Measurement corruptions r(y | x) as black-box samplers, for learning a clean distribution from corrupted data.

Every corruption maps clean images x: (B, C, H, W) to an image-shaped observation y: (B, C_y, H, W) that carries
all it measured: a linear measurement A x + noise_std e is lifted back to the image by the pseudo-inverse A^+
(pooled observations become blocky images, DCT coefficients a low-pass image), and a pixel mask is returned as the
masked image with the mask as an extra channel (`reveal_mask`), so masked zeros never read as grey pixels.
`start(y)` is the image-shaped part, where a bridge from y to x begins.

`identifiable` says whether the map p -> T_r p from clean to corrupted laws is injective (recovery possible in
principle): additive Gaussian noise (convolution with a kernel whose Fourier transform never vanishes), pixel masking
with p < 1 and the mask observed (the all-observed pattern has positive probability, so it reveals p), and a
full-column-rank linear map are; average pooling (k > 1) and a DCT projection lose a null space. `linear_rank` and
`transition_rank` check the flag: the rank of the noise-free linear map, and the rank of the transition matrix
estimated by sampling on a finite set of states (for corruptions with discrete outcomes).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from functools import lru_cache

import torch
import torch.nn.functional as F

from flowlab.core.distributions import randn
from flowlab.core.validation import check_tensor

__all__ = [
    "CORRUPTIONS",
    "AvgPool",
    "Corruption",
    "DCTProjection",
    "GaussianNoise",
    "LinearCorruption",
    "LinearOperator",
    "PixelMask",
    "linear_rank",
    "make_corruption",
    "transition_rank",
]


def _images(x: object, name: str = "x") -> torch.Tensor:
    check_tensor(x, name, min_dim=4)
    if x.dim() != 4 or not x.is_floating_point():
        raise ValueError(f"{name}: expected float images (B, C, H, W), got {tuple(x.shape)} of {x.dtype}")
    return x


def _number(value: object, name: str, low: float, high: float = math.inf, *, closed_high: bool = False) -> float:
    ok = isinstance(value, int | float) and math.isfinite(value) and low <= value
    ok = ok and (value <= high if closed_high else value < high)
    if not ok:
        bound = f"[{low}, {high}]" if closed_high else f"[{low}, {high})"
        raise ValueError(f"{name}: expected a number in {bound}, got {value!r}")
    return float(value)


class Corruption(ABC):
    """A black-box r(y | x): `sample(x, generator=)` draws y, image-shaped, carrying all the measurement holds."""

    name: str = ""  #: the short name `make_corruption` and the CLI know it by

    @property
    @abstractmethod
    def identifiable(self) -> bool:
        """Whether T_r is injective on distributions (see the module)."""

    @abstractmethod
    def sample(self, x: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """x: (B, C, H, W) -> y: (B, C_y, H, W), fresh randomness from `generator` at every call."""

    def observation_channels(self, channels: int) -> int:
        """C_y for images of `channels` channels."""
        return channels

    def start(self, y: torch.Tensor) -> torch.Tensor:
        """The image-shaped part of y (B, C_y, H, W) -> (B, C, H, W): the start of a bridge from y to x."""
        return _images(y, "y")


class LinearCorruption(Corruption):
    """y = A^+ (A x + noise_std e): a linear measurement with Gaussian noise, lifted back to the image."""

    noise_std: float = 0.0

    @abstractmethod
    def measure(self, x: torch.Tensor) -> torch.Tensor:
        """A x: the noise-free measurement of images (B, C, H, W) in its own shape."""

    @abstractmethod
    def lift(self, m: torch.Tensor) -> torch.Tensor:
        """A^+ m: a measurement back to the image shape (B, C, H, W)."""

    def project(self, x: torch.Tensor) -> torch.Tensor:
        """A^+ A x, the orthogonal projection onto what A sees; x - project(x) is x's null-space part."""
        return self.lift(self.measure(_images(x)))

    def sample(self, x: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """y = `lift(measure(x) + noise_std e)`: x: (B, C, H, W) -> (B, C, H, W), the noise drawn from `generator`."""
        m = self.measure(_images(x))
        if self.noise_std > 0:
            m = m + self.noise_std * randn(m.shape, generator=generator, device=m.device, dtype=m.dtype)
        return self.lift(m)


class GaussianNoise(LinearCorruption):
    """y = x + sigma e (A = I): identifiable for every sigma >= 0."""

    name = "noise"

    def __init__(self, sigma: float) -> None:
        self.sigma = self.noise_std = _number(sigma, "sigma", 0.0)

    def __repr__(self) -> str:
        return f"GaussianNoise(sigma={self.sigma})"

    @property
    def identifiable(self) -> bool:
        """Always true: the identity is injective."""
        return True

    def measure(self, x: torch.Tensor) -> torch.Tensor:
        """The identity: x: (B, C, H, W) -> x."""
        return x

    def lift(self, m: torch.Tensor) -> torch.Tensor:
        """The identity: m: (B, C, H, W) -> m."""
        return m


class AvgPool(LinearCorruption):
    """k x k average pooling (plus noise_std noise per pooled value), lifted back by nearest upsampling; H and W must
    be multiples of k. Not identifiable for k > 1: the within-block contrasts are lost."""

    name = "pool"

    def __init__(self, k: int, noise_std: float = 0.0) -> None:
        if not (isinstance(k, int) and k >= 1):
            raise ValueError(f"k: expected a pooling size >= 1, got {k!r}")
        self.k, self.noise_std = k, _number(noise_std, "noise_std", 0.0)

    def __repr__(self) -> str:
        return f"AvgPool(k={self.k}, noise_std={self.noise_std})"

    @property
    def identifiable(self) -> bool:
        """True only for k = 1 (no pooling)."""
        return self.k == 1

    def measure(self, x: torch.Tensor) -> torch.Tensor:
        """k x k average pooling: x: (B, C, H, W) -> (B, C, H / k, W / k); ValueError unless k divides H and W."""
        if x.shape[-1] % self.k or x.shape[-2] % self.k:
            raise ValueError(f"x: image side {tuple(x.shape[-2:])} is not a multiple of the pooling size k={self.k}")
        return F.avg_pool2d(x, self.k)

    def lift(self, m: torch.Tensor) -> torch.Tensor:
        """Nearest upsampling by k: m: (B, C, h, w) -> (B, C, k h, k w)."""
        return m.repeat_interleave(self.k, -2).repeat_interleave(self.k, -1)


@lru_cache(maxsize=8)
def _dct_matrix(n: int) -> torch.Tensor:
    """The orthonormal DCT-II matrix (n, n) in float64: row k is the k-th cosine basis vector."""
    i = torch.arange(n, dtype=torch.float64)
    c = torch.cos(math.pi * (i[None, :] + 0.5) * i[:, None] / n) * math.sqrt(2 / n)
    c[0] /= math.sqrt(2)
    return c


class DCTProjection(LinearCorruption):
    """Keep the lowest keep x keep 2-D DCT coefficients (orthonormal DCT-II per axis, plus noise_std noise each): a
    low-pass subspace, like a grayscale or a blur, losing the high frequencies. Needs keep < the image side; never
    identifiable."""

    name = "dct"

    def __init__(self, keep: int, noise_std: float = 0.0) -> None:
        if not (isinstance(keep, int) and keep >= 1):
            raise ValueError(f"keep: expected a number of coefficients per axis >= 1, got {keep!r}")
        self.keep, self.noise_std = keep, _number(noise_std, "noise_std", 0.0)

    def __repr__(self) -> str:
        return f"DCTProjection(keep={self.keep}, noise_std={self.noise_std})"

    @property
    def identifiable(self) -> bool:
        """Always false: the high frequencies are lost."""
        return False

    def _transform(self, x: torch.Tensor, *, inverse: bool) -> torch.Tensor:
        """The 2-D DCT (or its inverse) of x: (B, C, H, W), keeping only the lowest keep x keep coefficients."""
        h, w = x.shape[-2:]
        if self.keep >= min(h, w):
            raise ValueError(f"keep: expected fewer than the image side {min(h, w)} coefficients, got {self.keep}")
        rows = _dct_matrix(h).to(device=x.device, dtype=x.dtype)
        cols = _dct_matrix(w).to(device=x.device, dtype=x.dtype)
        kept = torch.zeros(h, w, device=x.device, dtype=x.dtype)
        kept[: self.keep, : self.keep] = 1
        return rows.T @ (x * kept) @ cols if inverse else (rows @ x @ cols.T) * kept

    def measure(self, x: torch.Tensor) -> torch.Tensor:
        """The DCT coefficients (B, C, H, W), zero beyond the kept block."""
        return self._transform(x, inverse=False)

    def lift(self, m: torch.Tensor) -> torch.Tensor:
        """The inverse DCT of the kept coefficients, the others zero: m -> (B, C, H, W)."""
        return self._transform(m, inverse=True)


class LinearOperator(LinearCorruption):
    """y = A^+ (A vec(x) + noise_std e) for a matrix A: (M, C*H*W) on flattened images of `image_shape` (C, H, W);
    identifiable when A has full column rank."""

    name = "linear"

    def __init__(self, matrix: torch.Tensor, image_shape: tuple[int, int, int], noise_std: float = 0.0) -> None:
        check_tensor(matrix, "matrix", min_dim=2)
        if matrix.dim() != 2 or not matrix.is_floating_point():
            raise ValueError(f"matrix: expected a float matrix (M, D), got {tuple(matrix.shape)}")
        if len(image_shape) != 3 or math.prod(image_shape) != matrix.shape[1]:
            raise ValueError(f"image_shape: expected (C, H, W) with C*H*W = {matrix.shape[1]}, got {image_shape!r}")
        self.matrix, self.image_shape = matrix.double(), tuple(int(s) for s in image_shape)
        self.pinv = torch.linalg.pinv(self.matrix)
        self.noise_std = _number(noise_std, "noise_std", 0.0)
        self._rank = int(torch.linalg.matrix_rank(self.matrix))

    def __repr__(self) -> str:
        return f"LinearOperator({tuple(self.matrix.shape)}, rank={self._rank}, noise_std={self.noise_std})"

    @property
    def identifiable(self) -> bool:
        """Whether A has full column rank."""
        return self._rank == self.matrix.shape[1]

    def measure(self, x: torch.Tensor) -> torch.Tensor:
        """`vec(x) A^T`: x: (B, C, H, W) of `image_shape` -> (B, M); ValueError for other image shapes."""
        if tuple(x.shape[1:]) != self.image_shape:
            raise ValueError(f"x: expected images of shape {self.image_shape}, got {tuple(x.shape[1:])}")
        return x.flatten(1) @ self.matrix.to(device=x.device, dtype=x.dtype).T

    def lift(self, m: torch.Tensor) -> torch.Tensor:
        """`m (A^+)^T` reshaped to images: m: (B, M) -> (B, C, H, W)."""
        return (m @ self.pinv.to(device=m.device, dtype=m.dtype).T).view(m.shape[0], *self.image_shape)


class PixelMask(Corruption):
    """Each pixel (all channels together) hidden with probability p, set to 0; with `reveal_mask` the mask is
    returned as an extra last channel (1 = observed). Identifiable for p < 1 with the mask revealed."""

    name = "mask"

    def __init__(self, p: float, *, reveal_mask: bool = True) -> None:
        self.p = _number(p, "p", 0.0, 1.0, closed_high=True)
        self.reveal_mask = bool(reveal_mask)

    def __repr__(self) -> str:
        return f"PixelMask(p={self.p}, reveal_mask={self.reveal_mask})"

    @property
    def identifiable(self) -> bool:
        """Whether the corruption is identifiable: p < 1 with the mask revealed."""
        return self.p < 1 and self.reveal_mask

    def observation_channels(self, channels: int) -> int:
        """`channels`, plus one for the mask channel with `reveal_mask`."""
        return channels + int(self.reveal_mask)

    def sample(self, x: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """x: (B, C, H, W) -> x with hidden pixels zeroed, plus the mask as a last channel with `reveal_mask`."""
        x = _images(x)
        u = torch.rand((x.shape[0], 1, *x.shape[2:]), generator=generator, dtype=x.dtype).to(x.device)
        mask = (u >= self.p).to(x.dtype)
        return torch.cat([x * mask, mask], 1) if self.reveal_mask else x * mask

    def start(self, y: torch.Tensor) -> torch.Tensor:
        """y without its mask channel (with `reveal_mask`): (B, C_y, H, W) -> (B, C, H, W)."""
        y = _images(y, "y")
        return y[:, :-1] if self.reveal_mask else y

    def mask(self, y: torch.Tensor) -> torch.Tensor:
        """The observed-pixel mask (B, 1, H, W) of a revealed-mask observation y."""
        if not self.reveal_mask:
            raise ValueError("y: this PixelMask does not reveal its mask (reveal_mask=False)")
        return _images(y, "y")[:, -1:]


#: name -> constructor, for configs and the CLI
CORRUPTIONS = {c.name: c for c in (GaussianNoise, PixelMask, AvgPool, DCTProjection)}


def make_corruption(name: str, **params: float) -> Corruption:
    """A corruption by name (`noise` sigma, `mask` p, `pool` k [noise_std], `dct` keep [noise_std])."""
    if name not in CORRUPTIONS:
        raise ValueError(f"corruption: unknown name {name!r}; expected one of {', '.join(CORRUPTIONS)}")
    try:
        return CORRUPTIONS[name](**params)
    except TypeError as err:
        raise ValueError(f"corruption: wrong parameters for {name!r}: {sorted(params)} ({err})") from err


def linear_rank(corruption: LinearCorruption, image_shape: tuple[int, int, int]) -> int:
    """The rank of the noise-free map x -> A^+ A x on images of `image_shape` (C, H, W): C*H*W iff A is injective."""
    if not isinstance(corruption, LinearCorruption):
        raise ValueError(f"corruption: expected a linear corruption, got {type(corruption).__name__}")
    d = math.prod(image_shape)
    basis = torch.eye(d, dtype=torch.float64).view(d, *image_shape)
    return int(torch.linalg.matrix_rank(corruption.project(basis).flatten(1)))


def transition_rank(
    corruption: Corruption, states: torch.Tensor, *, draws: int = 4000, generator: torch.Generator | None = None
) -> int:
    """The numerical rank of the transition matrix R[y, s] = r(y | x_s) estimated from `draws` samples of each of the
    S states (S, C, H, W), for corruptions with finitely many outcomes: T_r is injective on laws over the states iff
    the rank is S. Singular values under the sampling noise ((sqrt(U) + sqrt(S)) / (2 sqrt(draws)) for U outcomes)
    count as zero."""
    states = _images(states, "states")
    if not (isinstance(draws, int) and draws >= 1):
        raise ValueError(f"draws: expected a positive int, got {draws!r}")
    s = states.shape[0]
    y = corruption.sample(states.repeat_interleave(draws, 0), generator=generator).flatten(1)
    outcomes, index = torch.unique(y, dim=0, return_inverse=True)
    counts = torch.zeros(outcomes.shape[0], s, dtype=torch.float64)
    counts.index_put_(
        (index, torch.arange(s).repeat_interleave(draws)), torch.ones((), dtype=torch.float64), accumulate=True
    )
    tol = (math.sqrt(outcomes.shape[0]) + math.sqrt(s)) / (2 * math.sqrt(draws))
    return int((torch.linalg.svdvals(counts / draws) > tol).sum())
