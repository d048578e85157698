"""GFM data: earth event locations on S² (lat/lon CSVs), angle tables on T^d, seeded 80/10/10 splits, and the
generated wrapped-normal mixtures on the flat torus and on the Poincaré disk with exact log-densities.

Earth CSVs (`<data root>/earth_sphere/{volcano,earthquake,flood}.csv`) have two header-less columns, latitude and
longitude in degrees; a point maps to x = (cos lat cos lon, cos lat sin lon, sin lat) on the unit sphere, and back by
`sphere_to_latlon`. `save_table` writes a table in the format the loaders read.
"""

from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from flowlab.core.distributions import multinomial, randn
from flowlab.core.manifolds import FlatTorus, PoincareBall, WrappedNormal, wrap
from flowlab.core.manifolds.base import Manifold, check_count
from flowlab.core.validation import check_tensor

__all__ = [
    "ANGLE_RANGES",
    "EARTH_SETS",
    "Mixture",
    "Split",
    "latlon_to_sphere",
    "load_angles",
    "load_earth",
    "poincare_mixture",
    "random_torus_mixture",
    "save_table",
    "sphere_to_latlon",
    "split",
    "torus_mixture",
]

EARTH_SETS = ("volcano", "earthquake", "flood")


def _read_table(path: Path, what: str, *, delimiter: str = ",") -> np.ndarray:
    kind = "tab" if delimiter == "\t" else "comma"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # numpy's "no data" on an empty file: refused below
            table = np.loadtxt(path, delimiter=delimiter, ndmin=2, dtype=np.float64)
    except ValueError as err:
        raise ValueError(f"path: {path} is not a numeric {kind}-separated {what} table ({err})") from None
    if table.shape[0] == 0:
        raise ValueError(f"path: {path} holds no rows")
    if not np.isfinite(table).all():
        raise ValueError(f"path: {path} contains NaN or inf values")
    return table


def latlon_to_sphere(lat_lon: torch.Tensor) -> torch.Tensor:
    """(N, 2) latitude, longitude in degrees -> (N, 3) unit vectors (cos lat cos lon, cos lat sin lon, sin lat)."""
    check_tensor(lat_lon, "lat_lon")
    if lat_lon.dim() != 2 or lat_lon.shape[1] != 2:
        raise ValueError(f"lat_lon: expected shape (N, 2) (latitude, longitude), got {tuple(lat_lon.shape)}")
    if bool((lat_lon[:, 0].abs() > 90).any()):
        raise ValueError("lat_lon: latitudes must lie in [-90, 90] degrees")
    lat, lon = torch.deg2rad(lat_lon[:, 0]), torch.deg2rad(lat_lon[:, 1])
    return torch.stack([lat.cos() * lon.cos(), lat.cos() * lon.sin(), lat.sin()], dim=-1)


def sphere_to_latlon(x: torch.Tensor) -> torch.Tensor:
    """(N, 3) points of S² (their directions: any positive norm) -> (N, 2) latitude in [-90, 90] and longitude in
    [-180, 180] degrees, the columns of the earth CSVs: the inverse of `latlon_to_sphere`."""
    check_tensor(x, "x")
    if x.dim() != 2 or x.shape[1] != 3:
        raise ValueError(f"x: expected shape (N, 3) (points of the 2-sphere), got {tuple(x.shape)}")
    lat = torch.atan2(x[:, 2], torch.hypot(x[:, 0], x[:, 1]))
    return torch.rad2deg(torch.stack([lat, torch.atan2(x[:, 1], x[:, 0])], dim=-1))


def save_table(path: str | os.PathLike[str], table: torch.Tensor) -> None:
    """Write table: (N, k) as comma-separated rows without a header (9 significant digits: float32 exactly), the
    format `load_earth` and `load_angles` read."""
    check_tensor(table, "table")
    if table.dim() != 2:
        raise ValueError(f"table: expected shape (N, k), got {tuple(table.shape)}")
    rows = (",".join(f"{v:.9g}" for v in row) for row in table.tolist())
    Path(path).write_text("".join(f"{row}\n" for row in rows))


def load_earth(
    name: str, root: str | os.PathLike[str] | None = None, *, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """Earth event locations as unit vectors (N, 3): `name` is volcano, earthquake or flood, or a path to a CSV.

    root: the data root holding `earth_sphere/` (e.g. `flowlab.datasets.root()`; the core reads no environment
    variable). Raises FileNotFoundError naming the data set and the file when absent; ValueError for files without
    exactly two columns, latitudes outside [-90, 90] or NaNs.
    """
    if name in EARTH_SETS:
        if root is None:
            raise FileNotFoundError(
                f"root: the earth_sphere data set ({name}.csv) needs the data root holding earth_sphere/ "
                "(e.g. flowlab.datasets.root(), or --data-root / FLOWLAB_DATA on the command line)"
            )
        path = Path(root, "earth_sphere", f"{name}.csv")
        if not path.is_file():
            raise FileNotFoundError(f"earth_sphere data set not found: {path} (data root {root})")
    else:
        path = Path(name)
        if path.suffix != ".csv":
            raise ValueError(f"name: expected one of {EARTH_SETS} or a path to a .csv file, got {name!r}")
        if not path.is_file():
            raise FileNotFoundError(f"name: earth CSV file not found: {path}")
    table = _read_table(path, "latitude/longitude")
    if table.shape[1] != 2:
        raise ValueError(f"path: {path} must have exactly 2 columns (latitude, longitude), got {table.shape[1]}")
    if (np.abs(table[:, 0]) > 90).any():
        raise ValueError(f"path: {path} has latitudes outside [-90, 90] degrees (is the column order lat, lon?)")
    return latlon_to_sphere(torch.from_numpy(table)).to(dtype)


#: the range a column of angles may span in each unit: both [-π, π) and [0, 2π) conventions (and their degrees)
ANGLE_RANGES = {"radians": (-math.pi, 2 * math.pi), "degrees": (-180.0, 360.0)}


def load_angles(
    path: str | os.PathLike[str], *, degrees: bool = False, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """An angle table (one row per sample, one column per angle, no header; comma separated, or tab separated for
    a .tsv / .tab file) as points on the flat torus T^d: (N, d) wrapped to [-π, π). `degrees=True` reads degrees.

    Values outside the unit's range (`ANGLE_RANGES`: [-π, 2π] radians, [-180, 360] degrees, which hold both the
    signed and the positive convention) are an error naming the file, the range found and the other unit: a table
    of degrees read as radians would otherwise wrap into noise without a word."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"path: angle table not found: {path}")
    delimiter = "\t" if path.suffix.lower() in (".tsv", ".tab") else ","
    table = torch.from_numpy(_read_table(path, "angle", delimiter=delimiter))
    unit, other = ("degrees", "radians") if degrees else ("radians", "degrees")
    low, high = ANGLE_RANGES[unit]
    found = (float(table.min()), float(table.max()))
    if found[0] < low - 1e-6 or found[1] > high + 1e-6:
        raise ValueError(
            f"path: {path} holds angles from {found[0]:g} to {found[1]:g}, outside the {unit} range "
            f"[{low:g}, {high:g}]; if the table is in {other}, say so (--angle-unit {other})"
        )
    if degrees:
        table = torch.deg2rad(table)
    return wrap(table).to(dtype)


@dataclass(frozen=True)
class Split:
    """train, val, test: disjoint row subsets of the input (each (N_i, ...))."""

    train: torch.Tensor
    val: torch.Tensor
    test: torch.Tensor


def split(x: torch.Tensor, seed: int, fractions: tuple[float, float, float] = (0.8, 0.1, 0.1)) -> Split:
    """Random train/val/test split of the rows of x: (N, ...) with a permutation drawn from `seed`.

    The val and test sizes are round(f N); train takes the rest, so the three are disjoint and cover x.
    """
    check_tensor(x, "x")
    if len(fractions) != 3 or any(f < 0 for f in fractions) or not math.isclose(sum(fractions), 1.0, abs_tol=1e-6):
        raise ValueError(f"fractions: expected three non-negative fractions summing to 1, got {fractions!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed: expected an int, got {seed!r}")
    n = x.shape[0]
    n_val, n_test = round(fractions[1] * n), round(fractions[2] * n)
    if n - n_val - n_test < 1:
        raise ValueError(f"x: {n} rows are too few for the split {fractions}")
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).to(x.device)
    return Split(train=x[perm[n_val + n_test :]], val=x[perm[:n_val]], test=x[perm[n_val : n_val + n_test]])


class Mixture:
    """A mixture of wrapped normals Σ_k w_k WN(mean_k, scale) on a manifold with origin hooks (FlatTorus,
    PoincareBall, ...): exact `log_prob` (w.r.t. the Riemannian volume) by log-sum-exp over the core's closed-form
    `WrappedNormal` densities (on the torus the lattice sum over windings) and batched `sample`.

    means: (K, ambient_dim) on the manifold; scale: positive float (isotropic); weights: (K,) or None (uniform).
    """

    def __init__(
        self, manifold: Manifold, means: torch.Tensor, scale: float, weights: torch.Tensor | None = None
    ) -> None:
        check_tensor(means, "means")
        if means.dim() != 2 or means.shape[1] != manifold.ambient_dim:
            raise ValueError(f"means: expected shape (K, {manifold.ambient_dim}), got {tuple(means.shape)}")
        if not (isinstance(scale, int | float) and math.isfinite(scale) and scale > 0):
            raise ValueError(f"scale: expected a positive float, got {scale!r}")
        k = means.shape[0]
        if weights is None:
            weights = torch.full((k,), 1.0 / k, dtype=means.dtype, device=means.device)
        check_tensor(weights, "weights")
        if weights.shape != (k,) or bool((weights < 0).any()) or not float(weights.sum()) > 0:
            raise ValueError(f"weights: expected ({k},) non-negative weights with a positive sum")
        self.manifold = manifold
        self.means = means
        self.scale = float(scale)
        self.weights = weights / weights.sum()
        self.components = [WrappedNormal(manifold, m, self.scale) for m in means]

    def __repr__(self) -> str:
        return f"Mixture({self.manifold!r}, K={len(self.components)}, scale={self.scale})"

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, ambient_dim) on any device -> (B,) log-density w.r.t. the Riemannian volume, computed on the
        mixture's device and dtype, returned on x's."""
        parts = torch.stack([c.log_prob(x.to(self.means)) for c in self.components], dim=-1)
        return torch.logsumexp(parts + self.weights.log(), dim=-1).to(x)

    def sample(self, n: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """n draws (n, ambient_dim): a component per draw, then exp_mean(P_{0→mean} E w), w ~ N(0, scale² I)."""
        m = self.manifold
        check_count(n)
        idx = multinomial(self.weights, n, replacement=True, generator=generator)
        mean = self.means[idx]
        w = self.scale * randn((n, m.dim), generator=generator, device=self.means.device, dtype=self.means.dtype)
        origin = m.origin(device=mean.device, dtype=mean.dtype).expand_as(mean)
        return m.expmap(mean, m.transp(origin, mean, m.origin_frame(w)))


def random_torus_mixture(
    d: int,
    *,
    components: int = 4,
    scale: float = 0.3,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float64,
) -> Mixture:
    """A wrapped-normal mixture on T^d with `components` seeded uniform means on [-π, π)^d and isotropic `scale`."""
    check_count(components, "components")
    torus = FlatTorus(d)
    return Mixture(torus, torus.random_uniform(components, generator=generator, dtype=dtype), scale)


def torus_mixture(
    n: int, d: int, *, means: torch.Tensor, scale: float, generator: torch.Generator | None = None
) -> torch.Tensor:
    """n draws (n, d) from the equal-weight wrapped-normal mixture on T^d with `means`: (K, d)."""
    return Mixture(FlatTorus(d), means, scale).sample(n, generator=generator)


def poincare_mixture(
    *, components: int = 6, radius: float = 1.5, scale: float = 0.3, dtype: torch.dtype = torch.float64
) -> Mixture:
    """Equal-weight wrapped normals on the Poincaré disk (c = 1): means at hyperbolic distance `radius` from the
    origin (Euclidean norm tanh(radius / 2)), equally spaced in angle, isotropic `scale`."""
    check_count(components, "components")
    if not (radius >= 0 and math.isfinite(radius)):
        raise ValueError(f"radius: expected a non-negative finite hyperbolic radius, got {radius!r}")
    angle = 2 * math.pi * torch.arange(components, dtype=dtype) / components
    means = math.tanh(radius / 2) * torch.stack([angle.cos(), angle.sin()], dim=-1)
    return Mixture(PoincareBall(2), means, scale)
