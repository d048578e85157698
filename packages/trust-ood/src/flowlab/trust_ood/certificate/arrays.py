"""The user's own arrays for a certificate: read from an npz file (keys `inputs`, `outputs`) or a folder of `.npy`
files (`inputs.npy`, `outputs.npy`), never unpickled, and checked to be what the 1-D score models take.

The score models are 1-D: a sample is one field on a grid of n points, so `inputs` is (N, n) and `outputs` (N, n)
on the same grid (the built-in PDEs' u0 and u(T)); one row per sample, rows of the two arrays paired. Other shapes
(a channel axis, 2-D fields, a scalar per sample) are refused with the shape expected.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import numpy as np

__all__ = ["KEYS", "check_fields", "load_arrays"]

#: the arrays a study on the user's data reads: the regressor's inputs and the true outputs paired with them
KEYS = ("inputs", "outputs")
_NPY_MAGIC = b"\x93NUMPY"


def check_fields(array, name: str, *, like: np.ndarray | None = None) -> np.ndarray:
    """`array` as float32 (N, n): a real, finite, non-empty 2-D array (of `like`'s shape when given), else a
    ValueError starting `name: ` that says which shape was expected."""
    a = np.asarray(array)
    if not np.issubdtype(a.dtype, np.number) or np.iscomplexobj(a):
        raise ValueError(f"{name}: expected real numbers, got dtype {a.dtype}")
    if like is not None and a.shape != like.shape:
        raise ValueError(f"{name}: expected shape {like.shape} like the inputs (one row per input), got {a.shape}")
    if a.ndim != 2 or 0 in a.shape:
        raise ValueError(
            f"{name}: expected a non-empty 2-D array (N, n): N samples of a field on n grid points, got shape {a.shape}"
        )
    if not np.isfinite(a).all():
        raise ValueError(f"{name}: contains NaN or inf values")
    return a.astype(np.float32)


def _npz(path: Path, keys: tuple[str, ...], name: str) -> dict[str, np.ndarray]:
    if not zipfile.is_zipfile(path):  # before np.load, which would take any other bytes for a pickle
        what = "an empty file" if path.stat().st_size == 0 else "not an npz archive (corrupt or another format)"
        raise ValueError(f"{name}: {path} is {what}; expected an npz file of {', '.join(keys)} (np.savez)")
    try:
        with np.load(path, allow_pickle=False) as archive:
            missing = [k for k in keys if k not in archive.files]
            if missing:
                raise ValueError(f"{name}: {path} has no array {missing[0]!r} (it holds {sorted(archive.files)})")
            return {k: archive[k] for k in keys}
    except (OSError, EOFError, zipfile.BadZipFile, ValueError) as err:
        if str(err).startswith(f"{name}: "):
            raise
        raise ValueError(f"{name}: {path} holds no plain numeric arrays ({type(err).__name__})") from None


def _npy(path: Path, name: str) -> np.ndarray:
    if not path.is_file():
        raise ValueError(f"{name}: {path} not found")
    with path.open("rb") as f:
        if f.read(len(_NPY_MAGIC)) != _NPY_MAGIC:  # np.load would take other bytes for a pickle
            what = "an empty file" if path.stat().st_size == 0 else "not an .npy array (corrupt or another format)"
            raise ValueError(f"{name}: {path} is {what}; expected an array saved with np.save")
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, EOFError, ValueError) as err:
        raise ValueError(f"{name}: {path} holds no plain numeric array ({type(err).__name__})") from None


def load_arrays(
    path: str | os.PathLike[str], keys: tuple[str, ...] = KEYS, *, name: str = "path"
) -> dict[str, np.ndarray]:
    """The arrays `keys` of `path`, each float32 (N, n) and all of one shape (`check_fields`): an npz file holding
    them (other arrays in it are ignored), or a folder holding `<key>.npy` for each. Nothing is unpickled; a missing,
    empty, corrupt or pickled file, a missing key, or arrays of another shape or with NaN is one ValueError starting
    `name: ` and naming the file."""
    path = Path(path)
    if path.is_dir():
        found = {k: _npy(path / f"{k}.npy", name) for k in keys}
        where = {k: path / f"{k}.npy" for k in keys}
    elif path.is_file():
        found = _npz(path, keys, name)
        where = {k: path for k in keys}
    else:
        raise ValueError(f"{name}: {path} not found (expected an npz file or a folder of .npy files)")
    out: dict[str, np.ndarray] = {}
    for k in keys:
        try:
            out[k] = check_fields(found[k], k, like=out[keys[0]] if out else None)
        except ValueError as err:
            raise ValueError(f"{name}: {where[k]}: {err}") from None
    return out
