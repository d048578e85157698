"""Scenes from a user's own tracks: trajectory files plus optional annotations -> a `Scene` every policy runs on.

Trajectory files: the 4-column "frame ped_id x y" text/CSV files of the forecasting literature (ETH/UCY: 2.5 fps,
frame numbers stepping by 10; read by `read_pedestrian_txt`) and the package's own CSV (`ped_id,frame,...` header)
with its JSON sidecar (read by `load_window`). Positions are taken as metres, as given.

Annotations (a scene file in JSON, or the same content as a dict), every key optional:

    {
      "obstacles": [{"category": "bench", "description": "a wooden bench", "corners": [[x, y], ...4]}, ...],
      "interests": [{"category": "kiosk", "bbox": [cx, cy, w, h, theta]}, ...],
      "boundary": [[x, y], ...],
      "homography": [[...], [...], [...]],
      "image": "scene.jpg",
      "constants": {"max_speed": 2.5}
    }

Boxes are in metres: "corners" lists the 4 corners in order around the box; "bbox" is the centre, width, height and
rotation theta (radians) with `load_scene`'s corner convention. "boundary" is the walkable-area polyline in metres;
"homography" maps image pixels (u right, v down) to metres (default identity); "image" is an 8-bit RGB image (e.g.
JPEG; the reader takes PNG as float RGBA and rejects it), its path relative to the scene file's folder (to the working
directory for a dict); "constants" overrides the scene constants (`PAPER_CONSTANTS`, after `estimate_constants`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from flowlab.crowd_sim.data import (
    _CSV_COLUMNS,
    Boxes,
    Scene,
    Window,
    _boxes,
    _read_image,
    _read_json,
    load_window,
    read_pedestrian_txt,
)

__all__ = ["ANNOTATION_KEYS", "PAPER_CONSTANTS", "estimate_constants", "scene_from_tracks"]

#: The scene constants the code reads (neighbourhoods of `FeatureConfig.from_constants`, the image-brightness cell
#: `bright_grid // bin` pixels, the simulator's speed clamp, the collision distance), with the values of the shipped
#: UCY scene: "envsocial_diff_config" of crowds/scene_constants.json, i.e. EnvSocial-Diff's configs/ucy.yaml.
PAPER_CONSTANTS: dict[str, float | int] = {
    "dist_threshold_ped": 4.0,  # m, neighbours within
    "topk_ped": 6,
    "sight_angle_ped": 90.0,  # deg, half-angle of the view cone
    "dist_threshold_obs": 4.0,  # m, boxes within
    "topk_obs": 10,
    "dist_threshold_brights": 4.0,  # m, bright cells within
    "topk_brights": 20,
    "interests_radius": 1.2,  # m
    "collision_threshold": 0.5,  # m
    "max_speed": 2.0,  # m/s
    "bright_grid": 110,  # px
    "bin": 10,
}

#: the keys of a scene file
ANNOTATION_KEYS = ("obstacles", "interests", "boundary", "homography", "image", "constants")

_BOX_KEYS = ("category", "description", "corners", "bbox")
_SPEED_QUANTILE = 0.99
_SPEED_MARGIN = 1.2


@dataclass(frozen=True)
class _Annotations:
    obstacles: Boxes
    interests: Boxes
    boundary: torch.Tensor  # (B, 2) float32 metres
    homography: torch.Tensor  # (3, 3) float64
    image: np.ndarray | None  # (H, W, 3) uint8
    constants: dict


def scene_from_tracks(
    paths: str | Path | Sequence[str | Path],
    *,
    fps: float | None = None,
    time_unit: float | None = None,
    annotations: str | Path | Mapping | None = None,
    name: str | None = None,
    delimiter: str | None = None,
) -> Scene:
    """A `Scene` (frame "published") from trajectory files, one window per file named by its stem.

    paths: one file or several (.txt or .csv); a file with the package's CSV header (`ped_id,frame,...`) is read with
    its JSON sidecar by `load_window`, any other by `read_pedestrian_txt` (frame numbers may step by e.g. 10: `fps` is
    the rate of the recorded points, 2.5 for ETH/UCY). A repeated stem gets a suffix: "run", "run_2", ...
    fps / time_unit (seconds per frame, 1 / fps): give exactly one, unless every file is in the package's format and
    its sidecar carries meta.time_unit; a given value must agree with the sidecars. All windows share one time unit.
    annotations: a scene file (JSON) or dict, see the module docstring; None: no boxes, no boundary, identity
    homography, no image. name: default the first file's stem (or "user"). delimiter: of the 4-column files (None:
    whitespace and/or commas). Constants: `estimate_constants` of the windows, then the annotations' "constants".
    """
    files = _check_paths(paths)
    given = _given_time_unit(fps, time_unit)
    loaded = [_read_tracks(path, given, delimiter) for path in files]
    windows = {key: replace(w, name=key) for key, w in zip(_unique_names(files), loaded)}
    scene_time_unit = _common_time_unit(files, loaded)
    scene_name = (files[0].stem or "user") if name is None else name
    if not isinstance(scene_name, str) or not scene_name:
        raise ValueError(f"name: expected a non-empty string, got {name!r}")
    notes = _annotations(annotations)
    return Scene(
        name=scene_name,
        time_unit=scene_time_unit,
        obstacles=notes.obstacles,
        interests=notes.interests,
        boundary=notes.boundary,
        image=notes.image,
        constants={**estimate_constants(windows), **notes.constants},
        windows=windows,
        frame="published",
        homography=notes.homography,
    )


def estimate_constants(windows: Iterable[Window] | Mapping[str, Window]) -> dict:
    """`PAPER_CONSTANTS` with the values the data can tell: max_speed, the simulator's speed clamp.

    max_speed = max(2.0, 1.2 * q_0.99(s)) m/s, s the forward-difference speeds |p[t+1] - p[t]| / time_unit (N,) over
    every pair of consecutive tracked frames of every window: the 99th percentile ignores a few tracking glitches,
    the 20% margin leaves room for the fastest walkers, and the paper's 2.0 m/s is the floor. Without any such pair
    the paper's value stays.
    """
    speeds = np.concatenate([np.zeros(0), *(_speeds(w) for w in _windows_of(windows))])
    constants = dict(PAPER_CONSTANTS)
    if len(speeds):
        quantile = _SPEED_MARGIN * float(np.quantile(speeds, _SPEED_QUANTILE))
        constants["max_speed"] = max(float(PAPER_CONSTANTS["max_speed"]), quantile)
    return constants


# --- tracks ------------------------------------------------------------------------------------------------------


def _check_paths(paths: str | Path | Sequence[str | Path]) -> list[Path]:
    """The trajectory files as Paths; FileNotFoundError / ValueError naming the missing or unsupported file."""
    files = [Path(p) for p in ([paths] if isinstance(paths, str | Path) else paths)]
    if not files:
        raise ValueError("paths: expected one or more trajectory files, got none")
    for path in files:
        if not path.is_file():
            raise FileNotFoundError(f"paths: trajectory file not found: {path}")
        if path.suffix.lower() not in (".txt", ".csv"):
            raise ValueError(f"paths: {path}: expected a .txt or .csv trajectory file, got suffix {path.suffix!r}")
    return files


def _given_time_unit(fps: float | None, time_unit: float | None) -> float | None:
    """Seconds per frame from exactly one of fps / time_unit (None when neither is given)."""
    if fps is not None and time_unit is not None:
        raise ValueError(f"fps / time_unit: give one of them (time_unit = 1 / fps), got fps={fps} and {time_unit=}")
    for value, what in ((fps, "fps"), (time_unit, "time_unit")):
        if value is not None and not (_is_number(value) and math.isfinite(value) and value > 0):
            raise ValueError(f"{what}: expected a positive number, got {value!r}")
    if fps is not None:
        return 1.0 / fps
    return None if time_unit is None else float(time_unit)


def _read_tracks(path: Path, given: float | None, delimiter: str | None) -> Window:
    """One file as a Window: the package's CSV + sidecar, else the 4-column format at the `given` time unit."""
    if not _has_package_header(path):
        if given is None:
            raise ValueError(
                f"{path}: the 4-column 'frame ped_id x y' format carries no time unit; pass fps= (2.5 for ETH/UCY) "
                "or time_unit= (seconds per frame)"
            )
        return read_pedestrian_txt(path, time_unit=given, delimiter=delimiter)
    sidecar = path.with_suffix(".json")
    if not sidecar.is_file():
        raise FileNotFoundError(f"{path}: JSON sidecar not found: {sidecar} (the package's CSV format needs one)")
    meta = _read_json(sidecar).get("meta")
    own = meta.get("time_unit") if isinstance(meta, dict) else None
    if own is not None and not (_is_number(own) and math.isfinite(own) and own > 0):
        raise ValueError(f"{sidecar}: meta.time_unit must be a positive number of seconds per frame, got {own!r}")
    if own is not None and given is not None and not math.isclose(own, given):
        raise ValueError(f"{sidecar}: meta.time_unit is {own} s, but fps / time_unit gives {given} s per frame")
    if own is None and given is None:
        raise ValueError(f"{sidecar}: no meta.time_unit; pass fps= or time_unit= (seconds per frame)")
    return load_window(path, time_unit=given)


def _has_package_header(path: Path) -> bool:
    """Whether the first non-empty line is the package's CSV header (it names ped_id, frame, x and y)."""
    with path.open(errors="replace") as f:
        first = next((line for line in f if line.strip()), "")
    columns = {c.strip() for c in first.split(",")}
    return all(c in columns for c in _CSV_COLUMNS)


def _unique_names(files: list[Path]) -> list[str]:
    """The file stems, a repeated one suffixed "_2", "_3", ..."""
    names: list[str] = []
    for path in files:
        name, k = path.stem, 1
        while name in names:
            k += 1
            name = f"{path.stem}_{k}"
        names.append(name)
    return names


def _common_time_unit(files: list[Path], windows: list[Window]) -> float:
    """The windows' one time unit; ValueError listing each file's when they differ."""
    units = [w.time_unit for w in windows]
    if any(not math.isclose(u, units[0]) for u in units):
        shown = ", ".join(f"{path} {u} s" for path, u in zip(files, units))
        raise ValueError(f"paths: the files' time units differ ({shown}); a scene has one time unit")
    return units[0]


def _windows_of(windows: Iterable[Window] | Mapping[str, Window]) -> list[Window]:
    listed = list(windows.values() if isinstance(windows, Mapping) else windows)
    bad = [type(w).__name__ for w in listed if not isinstance(w, Window)]
    if bad:
        raise ValueError(f"windows: expected Windows (or a dict of them, e.g. scene.windows), got {', '.join(bad)}")
    return listed


def _speeds(window: Window) -> np.ndarray:
    """Forward-difference speeds (N,) in m/s over the pairs of consecutive frames where a pedestrian is tracked."""
    step = window.mask[1:] & window.mask[:-1]  # (T-1, P)
    speed = (window.positions[1:] - window.positions[:-1]).double().norm(dim=-1) / window.time_unit
    return speed[step].cpu().numpy()


# --- annotations -------------------------------------------------------------------------------------------------


def _annotations(annotations: str | Path | Mapping | None) -> _Annotations:
    """The validated annotations; errors name the scene file (or "annotations") and the key."""
    if annotations is None:
        annotations, where, folder = {}, "annotations", Path()
    elif isinstance(annotations, str | Path):
        path = Path(annotations)
        if not path.is_file():
            raise FileNotFoundError(f"annotations: scene file not found: {path}")
        annotations, where, folder = _read_json(path), str(path), path.parent
    elif isinstance(annotations, Mapping):
        where, folder = "annotations", Path()
    else:
        raise ValueError(f"annotations: expected a scene file path or a dict, got {type(annotations).__name__}")
    unknown = sorted(set(annotations) - set(ANNOTATION_KEYS))
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}; expected some of {', '.join(ANNOTATION_KEYS)}")
    image = annotations.get("image")
    return _Annotations(
        obstacles=_box_list(annotations.get("obstacles", []), f"{where}: 'obstacles'"),
        interests=_box_list(annotations.get("interests", []), f"{where}: 'interests'"),
        boundary=_boundary(annotations.get("boundary", []), f"{where}: 'boundary'"),
        homography=_homography(annotations.get("homography", np.eye(3).tolist()), f"{where}: 'homography'"),
        image=None if image is None else _image(image, folder, f"{where}: 'image'"),
        constants=_constant_overrides(annotations.get("constants", {}), f"{where}: 'constants'"),
    )


def _box_list(entries: object, where: str) -> Boxes:
    """Box entries -> Boxes: corners (M, 4, 2), centres (M, 2) (of a bbox: its centre; of corners: their mean)."""
    if not isinstance(entries, list):
        raise ValueError(f"{where}: expected a list of boxes, got {type(entries).__name__}")
    boxes = [_box(entry, f"{where}[{i}]") for i, entry in enumerate(entries)]
    return Boxes(
        corners=torch.stack([b.corners[0] for b in boxes]) if boxes else torch.zeros(0, 4, 2),
        centres=torch.stack([b.centres[0] for b in boxes]) if boxes else torch.zeros(0, 2),
        categories=tuple(b.categories[0] for b in boxes),
        descriptions=tuple(b.descriptions[0] for b in boxes),
    )


def _box(entry: object, where: str) -> Boxes:
    """One box entry {category, description?, corners | bbox} in metres -> Boxes of one."""
    if not isinstance(entry, Mapping):
        raise ValueError(f"{where}: expected an object with 'category' and 'corners' or 'bbox'")
    unknown = sorted(set(entry) - set(_BOX_KEYS))
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}; expected some of {', '.join(_BOX_KEYS)}")
    category, description = entry.get("category"), entry.get("description", "")
    if not isinstance(category, str) or not category:
        raise ValueError(f"{where}: 'category' must be a non-empty string, got {category!r}")
    if not isinstance(description, str):
        raise ValueError(f"{where}: 'description' must be a string, got {description!r}")
    if ("corners" in entry) == ("bbox" in entry):
        raise ValueError(f"{where}: give exactly one of 'corners' [[x, y] x 4] or 'bbox' [cx, cy, w, h, theta]")
    if "bbox" in entry:
        bbox = _array(entry["bbox"], (5,), f"{where}: 'bbox' [cx, cy, w, h, theta]")
        if not (bbox[2] > 0 and bbox[3] > 0):
            raise ValueError(f"{where}: 'bbox' width and height must be positive, got {bbox[2]} and {bbox[3]}")
        return _boxes([{**entry, "bbox": bbox.tolist()}], torch.eye(3, dtype=torch.float64), where)
    corners = torch.as_tensor(_array(entry["corners"], (4, 2), f"{where}: 'corners' [[x, y] x 4]"))
    return Boxes(corners[None].float(), corners.mean(0, keepdim=True).float(), (category,), (description,))


def _boundary(points: object, where: str) -> torch.Tensor:
    """[[x, y], ...] metres -> (B, 2) float32."""
    if isinstance(points, list) and not points:
        return torch.zeros(0, 2)
    return torch.as_tensor(_array(points, (-1, 2), f"{where} [[x, y], ...]")).float()


def _homography(matrix: object, where: str) -> torch.Tensor:
    """3 x 3 pixel -> metre map -> (3, 3) float64, checked invertible."""
    H = _array(matrix, (3, 3), f"{where} (3 x 3, pixel -> metres)")
    if abs(np.linalg.det(H)) < 1e-12:
        raise ValueError(f"{where}: the matrix is singular (metres_to_pixel needs its inverse)")
    return torch.as_tensor(H, dtype=torch.float64)


def _image(relative: object, folder: Path, where: str) -> np.ndarray:
    """(H, W, 3) uint8 image at `folder / relative`."""
    if not isinstance(relative, str) or not relative:
        raise ValueError(f"{where}: expected an image path (relative to the scene file's folder), got {relative!r}")
    path = folder / relative
    if not path.is_file():
        raise FileNotFoundError(f"{where}: image not found: {path}")
    return _read_image(path)


def _constant_overrides(constants: object, where: str) -> dict:
    """{key: value} with keys of `PAPER_CONSTANTS`: positive numbers, integers where the paper's value is one."""
    if not isinstance(constants, Mapping):
        raise ValueError(f"{where}: expected an object of scene constants, got {type(constants).__name__}")
    unknown = sorted(set(constants) - set(PAPER_CONSTANTS))
    if unknown:
        raise ValueError(f"{where}: unknown constant(s) {unknown}; expected some of {', '.join(PAPER_CONSTANTS)}")
    for key, value in constants.items():
        count = isinstance(PAPER_CONSTANTS[key], int)
        valid = isinstance(value, int) if count else _is_number(value) and math.isfinite(value)
        if not (valid and not isinstance(value, bool) and value > 0):
            kind = "a positive integer" if count else "a positive number"
            raise ValueError(f"{where}: {key!r} must be {kind}, got {value!r}")
    return {k: v if isinstance(PAPER_CONSTANTS[k], int) else float(v) for k, v in constants.items()}


def _array(value: object, shape: tuple[int, ...], where: str) -> np.ndarray:
    """A nested list of finite numbers as float64 of `shape` (-1: any length), else ValueError naming `where`."""
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: expected numbers, got {json.dumps(value, default=str)[:80]}") from None
    fits = array.ndim == len(shape) and all(s in (-1, n) for s, n in zip(shape, array.shape))
    if not fits:
        expected = " x ".join("n" if s == -1 else str(s) for s in shape)
        raise ValueError(f"{where}: expected {expected} numbers, got shape {array.shape}")
    if not np.isfinite(array).all():
        raise ValueError(f"{where}: contains NaN or inf values")
    return array


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
