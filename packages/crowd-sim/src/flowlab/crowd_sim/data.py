"""Crowd data: tracked pedestrians as dense windows, the annotated scenes of `$FLOWLAB_DATA/crowds`, and readers.

A `Window` holds one time window of tracks, dense over frames: positions (T, P, 2) with a presence mask (T, P).
`load_scene` reads a scene of `$FLOWLAB_DATA/crowds` (UCY students03 or Grand Central): its windows (CSV + JSON
sidecar each), the annotated obstacles and objects of interest (rotated pixel boxes mapped to metres through the
scene homography), the walkable-area boundary and, for GC, the scene image. `read_pedestrian_txt` reads the
4-column "frame ped_id x y" text files of the trajectory-forecasting literature.

Coordinate frames (see `crowds/README.md`, "Coordinate frames"): the default `frame="published"` keeps the CSV
coordinates as SPDiff/EnvSocial-Diff use them, so numbers compare with the papers'. For UCY these are not exactly
metric (the homography was fitted with the image row pointing down but applied to y-up annotation coordinates);
`frame="corrected"` maps every point (tracks, destinations, boxes, boundary) to the frame the homography was fitted
in: (x_ann, y_ann) = dehomog(M^-1 [x, y, 1]), (x', y') = dehomog(M [x_ann, -y_ann, 1]). GC is consistent: both frames
are identical there.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from flowlab import datasets
from flowlab.core.validation import check_choice, check_tensor
from flowlab.crowd_sim.names import FRAMES, SCENES

__all__ = [
    "FRAMES",
    "SCENES",
    "SPLITS",
    "Boxes",
    "Scene",
    "Window",
    "load_scene",
    "load_window",
    "present_range",
    "read_pedestrian_txt",
    "scene_files",
    "write_pedestrian_txt",
]

#: window names (file stems under crowds/<scene>/) per scene and split; spec §6
SPLITS: dict[str, dict[str, tuple[str, ...]]] = {
    "ucy_students03": {
        "train": ("time000-054", "time054-108"),
        "val": ("time108-162",),
        "test": ("time162-216",),
    },
    "gc": {
        "train": ("time2104-2164", "time2164-2224", "time2224-2284"),
        "val": ("time2284-2344",),
        "test": ("time2344-2404",),
        "extra": (
            "time0760-0820",
            "time1000-1060",
            "time1100-1160",
            "time1280-1340",
            "time1560-1620",
            "time1880-1940",
            "time1976-2036",
            "time2040-2100",
        ),
    },
}

_CSV_COLUMNS = ("ped_id", "frame", "x", "y")
_TXT_COLUMNS = ("frame", "ped_id", "x", "y")


@dataclass(frozen=True)
class _Layout:
    """Where a scene's files are and how its annotation pixels reach the homography's input."""

    annotation: str  # annotation JSON under crowds/<scene>/
    image: str | None  # scene image under crowds/<scene>/; None where it is not shipped
    centred_y_up: bool  # annotation coordinates are (u - W/2, H/2 - v) (UCY), else raw pixels (u, v) (GC)


_LAYOUTS = {
    "ucy_students03": _Layout("student03.json", None, centred_y_up=True),
    "gc": _Layout("gc.json", "scene/bg.jpg", centred_y_up=False),
}


def present_range(mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """First and last frame at which each pedestrian is present: mask (T, P) bool -> (P,), (P,) long.

    A pedestrian never present gets first 0 and last T - 1.
    """
    present = mask.to(torch.uint8)
    first = present.argmax(0)
    last = mask.shape[0] - 1 - present.flip(0).argmax(0)
    return first, last


@dataclass(frozen=True, eq=False)
class Window:
    """One time window of tracked pedestrians, dense over frames.

    positions: (T, P, 2) float32 metres, 0 where absent; mask: (T, P) bool, pedestrian p tracked at frame t;
    destinations: (P, 2) float32, each pedestrian's final waypoint; time_unit: seconds per frame;
    ped_ids: (P,) long, the ids of the source file.
    """

    name: str
    positions: torch.Tensor
    mask: torch.Tensor
    destinations: torch.Tensor
    time_unit: float
    ped_ids: torch.Tensor

    def __post_init__(self) -> None:
        check_tensor(self.positions, "positions", min_dim=3)
        T, P = self.positions.shape[:2]
        if self.positions.shape != (T, P, 2) or not self.positions.is_floating_point():
            raise ValueError(f"positions: expected a float (T, P, 2) tensor, got {tuple(self.positions.shape)}")
        _check_mask(self.mask, (T, P))
        check_tensor(self.destinations, "destinations")
        if self.destinations.shape != (P, 2):
            raise ValueError(f"destinations: expected shape ({P}, 2), got {tuple(self.destinations.shape)}")
        ids = self.ped_ids
        if not isinstance(ids, torch.Tensor) or ids.shape != (P,) or ids.is_floating_point():
            got = f"{ids.dtype} {tuple(ids.shape)}" if isinstance(ids, torch.Tensor) else type(ids).__name__
            raise ValueError(f"ped_ids: expected an integer tensor of shape ({P},), got {got}")
        _check_time_unit(self.time_unit)

    @property
    def num_frames(self) -> int:
        """The number of frames T of the window."""
        return int(self.positions.shape[0])

    @property
    def num_pedestrians(self) -> int:
        """The number of pedestrians P of the window."""
        return int(self.positions.shape[1])

    @property
    def first_frame(self) -> torch.Tensor:
        """(P,) long: the first frame at which each pedestrian is present."""
        return present_range(self.mask)[0]

    @property
    def last_frame(self) -> torch.Tensor:
        """(P,) long: the last frame at which each pedestrian is present."""
        return present_range(self.mask)[1]

    def velocities(self) -> torch.Tensor:
        """Forward differences (T, P, 2): v[t] = (p[t+1] - p[t]) / time_unit where p is present at t and t + 1.

        At the last frame of each tracked run (a pedestrian's last frame, or the frame before a gap) the previous
        velocity is repeated; a single-frame run and absent entries get 0.
        """
        step = self.mask[1:] & self.mask[:-1]  # (T-1, P)
        forward = (self.positions[1:] - self.positions[:-1]) / self.time_unit * step.unsqueeze(-1)
        v = torch.cat([forward, torch.zeros_like(self.positions[:1])])
        run_end = self.mask & ~torch.cat([self.mask[1:], torch.zeros_like(self.mask[:1])])
        from_previous = run_end & torch.cat([torch.zeros_like(step[:1]), step])
        previous = torch.cat([torch.zeros_like(v[:1]), v[:-1]])
        return torch.where(from_previous.unsqueeze(-1), previous, v)

    def subset(self, frames: slice) -> Window:
        """The window restricted to `frames` (a slice of frame indices, positive step); frame 0 of the result is
        the slice start, time_unit is multiplied by the step, pedestrians absent throughout are dropped.
        Destinations stay each pedestrian's final waypoint."""
        if not isinstance(frames, slice):
            raise ValueError(f"frames: expected a slice of frame indices, got {type(frames).__name__}")
        start, stop, step = frames.indices(self.num_frames)
        if step < 1 or len(range(start, stop, step)) == 0:
            raise ValueError(f"frames: {frames} selects no frame of {self.num_frames} in window {self.name!r}")
        mask = self.mask[frames]
        keep = mask.any(0)
        return Window(
            name=self.name,
            positions=self.positions[frames][:, keep],
            mask=mask[:, keep],
            destinations=self.destinations[keep],
            time_unit=self.time_unit * step,
            ped_ids=self.ped_ids[keep],
        )


@dataclass(frozen=True, eq=False)
class Boxes:
    """Annotated obstacles or objects of interest in the scene's metric frame (M may be 0).

    corners: (M, 4, 2) float32, the rotated pixel box's corners mapped through the homography (in order
    (-w, -h), (+w, -h), (+w, +h), (-w, +h) half-extents before rotation); centres: (M, 2) float32, the pixel box
    centre mapped through the homography (not the mean of the corners: the map is a perspective one).
    """

    corners: torch.Tensor
    centres: torch.Tensor
    categories: tuple[str, ...]
    descriptions: tuple[str, ...]

    def __post_init__(self) -> None:
        m = len(self.categories)
        if self.corners.shape != (m, 4, 2) or self.centres.shape != (m, 2) or len(self.descriptions) != m:
            raise ValueError(
                f"Boxes: expected corners ({m}, 4, 2), centres ({m}, 2) and {m} descriptions for {m} categories, "
                f"got {tuple(self.corners.shape)}, {tuple(self.centres.shape)} and {len(self.descriptions)}"
            )


@dataclass(frozen=True, eq=False)
class Scene:
    """A crowd scene: annotations in metres, the scene image, the loaded windows, and the pixel <-> metre maps.

    boundary: (B, 2) float32 metres, the walkable-area polyline; image: (H, W, 3) uint8 (GC) or None (UCY: not
    shipped); constants: the scene's "envsocial_diff_config" block of scene_constants.json; frame: "published" or
    "corrected" (see the module docstring); homography: (3, 3) float64, image pixel (u right, v down) -> metres in
    this scene's frame.
    """

    name: str
    time_unit: float
    obstacles: Boxes
    interests: Boxes
    boundary: torch.Tensor
    image: np.ndarray | None
    constants: dict
    windows: dict[str, Window]
    frame: str
    homography: torch.Tensor

    @classmethod
    def from_tracks(
        cls,
        paths: str | Path | Sequence[str | Path],
        *,
        fps: float | None = None,
        time_unit: float | None = None,
        annotations: str | Path | dict | None = None,
        name: str | None = None,
        delimiter: str | None = None,
    ) -> Scene:
        """A scene from a user's trajectory files (4-column "frame ped_id x y" or the package's CSV + JSON) and
        optional annotations: `flowlab.crowd_sim.tracks.scene_from_tracks`, which documents the arguments."""
        from flowlab.crowd_sim.tracks import scene_from_tracks  # tracks builds on this module

        return scene_from_tracks(
            paths, fps=fps, time_unit=time_unit, annotations=annotations, name=name, delimiter=delimiter
        )

    def pixel_to_metres(self, uv: torch.Tensor) -> torch.Tensor:
        """Image pixels uv: (..., 2) (u right, v down, origin top-left) -> (..., 2) metres in the scene's frame."""
        return _apply_homography(self.homography, _check_points(uv, "uv"))

    def metres_to_pixel(self, xy: torch.Tensor) -> torch.Tensor:
        """Metres xy: (..., 2) in the scene's frame -> (..., 2) image pixels (inverse of `pixel_to_metres`)."""
        return _apply_homography(torch.linalg.inv(self.homography), _check_points(xy, "xy"))


def scene_files(name: str, root: str | Path | None = None, *, windows: str | Sequence[str] = "all") -> list[Path]:
    """The files `load_scene(name, root, windows=windows)` reads: the scene constants, the annotation, the image
    (where shipped) and the windows' CSVs (e.g. for the checksum of an artifact built from them)."""
    if name not in SCENES:
        raise ValueError(f"name: unknown scene {name!r}; expected one of {', '.join(map(repr, SCENES))}")
    layout = _LAYOUTS[name]
    image = [f"{name}/{layout.image}"] if layout.image else []
    relative = ["scene_constants.json", f"{name}/{layout.annotation}", *image,
                *(f"{name}/{w}.csv" for w in _window_names(name, windows))]  # fmt: skip
    return [_data_file(r, root) for r in relative]


def load_scene(
    name: str,
    root: str | Path | None = None,
    *,
    windows: str | Sequence[str] = "all",
    frame: str = "published",
) -> Scene:
    """Load a scene of `<root>/crowds/<name>/` with the chosen windows.

    root: the data root holding `crowds/` (default `$FLOWLAB_DATA`); windows: a split ("train", "val", "test",
    "extra" (GC only) or "all") or explicit window names (see `SPLITS`); frame: "published" (default, the CSV
    coordinates as published) or "corrected" (UCY reprojected to the homography's fit convention; GC unchanged).
    Missing files raise FileNotFoundError naming the path and FLOWLAB_DATA.
    """
    if name not in SCENES:
        raise ValueError(f"name: unknown scene {name!r}; expected one of {', '.join(map(repr, SCENES))}")
    check_choice(frame, FRAMES, "frame")
    selected = _window_names(name, windows)
    layout = _LAYOUTS[name]
    constants = _scene_constants(_data_file("scene_constants.json", root), name, layout)
    annotation_path = _data_file(f"{name}/{layout.annotation}", root)
    annotation = _read_json(annotation_path)
    homography = _pixel_homography(constants[name], layout, frame)
    published = _pixel_homography(constants[name], layout, "published")
    loaded = {w: load_window(_data_file(f"{name}/{w}.csv", root)) for w in selected}
    if not torch.equal(homography, published):
        to_frame = homography @ torch.linalg.inv(published)  # published metres -> pixels -> metres in `frame`
        loaded = {w: _transform_window(window, to_frame) for w, window in loaded.items()}
    return Scene(
        name=name,
        time_unit=float(constants["time_unit_s"]),
        obstacles=_boxes(annotation.get("obstacles", []), homography, f"{annotation_path} 'obstacles'"),
        interests=_boxes(annotation.get("interest", []), homography, f"{annotation_path} 'interest'"),
        boundary=_boundary(annotation.get("boundary_line", []), homography, annotation_path),
        image=_read_image(_data_file(f"{name}/{layout.image}", root)) if layout.image else None,
        constants=dict(constants[name]["envsocial_diff_config"]),
        windows=loaded,
        frame=frame,
        homography=homography,
    )


def load_window(csv_path: str | Path, *, time_unit: float | None = None) -> Window:
    """Read a window: CSV `ped_id,frame,t_seconds,x,y` (t_seconds optional, unused) + JSON sidecar of the same stem.

    The sidecar's "destinations" (a list indexed by ped_id of [x, y, frame] waypoint lists) gives each pedestrian's
    destination, its last waypoint; time_unit defaults to the sidecar's meta.time_unit. Frame 0 is the window start,
    so T = the largest frame + 1. Other sidecar keys (GC's "obstacles" desk circle) are ignored. Raises ValueError
    naming the file, column or pedestrian and line on missing columns, non-numbers, non-integer or negative frames,
    frames not increasing within a pedestrian, NaN/inf values, or a destination count that does not match.
    """
    path = Path(csv_path)
    sidecar = path.with_suffix(".json")
    for file, what in ((path, "trajectory CSV"), (sidecar, "JSON sidecar")):
        if not file.is_file():
            raise FileNotFoundError(f"csv_path: {what} not found: {file}")
    header, lines, fields = _read_csv(path)
    columns = {name: fields[header.index(name)] for name in _CSV_COLUMNS}
    ped = _integers(columns["ped_id"], lines, path, "ped_id")
    frame = _integers(columns["frame"], lines, path, "frame", non_negative=True)
    xy = np.stack([_numbers(columns[c], lines, path, c) for c in ("x", "y")], axis=1)
    _check_finite(xy, lines, path, ("x", "y"))
    _check_increasing(ped, frame, lines, path)
    meta = _read_json(sidecar)
    positions, mask, ids = _dense(ped, frame, xy)
    return _window(
        path.stem,
        positions,
        mask,
        _sidecar_destinations(meta, ids, sidecar),
        ids,
        _sidecar_time_unit(meta, sidecar) if time_unit is None else time_unit,
    )


def read_pedestrian_txt(path: str | Path, *, time_unit: float = 0.4, delimiter: str | None = None) -> Window:
    """Read the 4-column "frame ped_id x y" text format of ETH/UCY forecasting files (one point per line).

    delimiter: None splits on any run of whitespace and/or commas. Frame numbers may step by e.g. 10: they map
    to consecutive frame indices by their common step (the gcd of the differences of the distinct frames), with
    frame 0 the first frame in the file. Rows of different pedestrians may interleave, but frames must increase
    within a pedestrian. Gaps are allowed (mask False). Destinations are each pedestrian's last point.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"path: pedestrian text file not found: {path}")
    lines, fields = _read_txt(path, delimiter)
    frame = _integers(fields[0], lines, path, "frame")
    ped = _integers(fields[1], lines, path, "ped_id")
    xy = np.stack([_numbers(fields[i], lines, path, c) for i, c in ((2, "x"), (3, "y"))], axis=1)
    _check_finite(xy, lines, path, ("x", "y"))
    _check_increasing(ped, frame, lines, path)
    distinct = np.unique(frame)
    step = int(np.gcd.reduce(np.diff(distinct))) if len(distinct) > 1 else 1
    positions, mask, ids = _dense(ped, (frame - distinct[0]) // step, xy)
    last = present_range(torch.from_numpy(mask))[1].numpy()
    return _window(path.stem, positions, mask, positions[last, np.arange(len(ids))], ids, time_unit)


def write_pedestrian_txt(window: Window, path: str | Path) -> Path:
    """Write `window` as tab-separated "frame ped_id x y" lines, ordered by frame then pedestrian.

    Frames are the window's frame indices; `read_pedestrian_txt` re-bases them to the first frame written (leading
    and trailing frames without anyone present are not kept) and takes destinations as the last points.
    """
    if not isinstance(window, Window):
        raise ValueError(f"window: expected a Window, got {type(window).__name__}")
    t, p = window.mask.cpu().nonzero(as_tuple=True)
    xy = window.positions.cpu()[t, p].double().numpy()
    table = np.column_stack([t.numpy(), window.ped_ids.cpu()[p].numpy(), xy])
    path = Path(path)
    np.savetxt(path, table, fmt=["%d", "%d", "%.9g", "%.9g"], delimiter="\t")
    return path


# --- file parsing ------------------------------------------------------------------------------------------------


def _read_csv(path: Path) -> tuple[list[str], np.ndarray, list[tuple[str, ...]]]:
    """Header, 1-based line numbers (N,) and columns of string fields of a CSV with the `_CSV_COLUMNS`."""
    with path.open(newline="") as f:
        reader = csv.reader(f)
        header = [h.strip() for h in next(reader, [])]
        records = [(reader.line_num, row) for row in reader if row]
    missing = [c for c in _CSV_COLUMNS if c not in header]
    if missing:
        raise ValueError(f"{path}: missing column(s) {', '.join(map(repr, missing))} (header: {','.join(header)})")
    if not records:
        raise ValueError(f"{path}: no data rows after the header")
    for line, row in records:
        if len(row) != len(header):
            raise ValueError(f"{path}: line {line} has {len(row)} fields, expected {len(header)} ({','.join(header)})")
    return header, np.array([line for line, _ in records]), list(zip(*(row for _, row in records)))


def _read_txt(path: Path, delimiter: str | None) -> tuple[np.ndarray, list[tuple[str, ...]]]:
    """1-based line numbers (N,) and the 4 columns of string fields of a "frame ped_id x y" text file."""
    records = []
    with path.open() as f:
        for number, text in enumerate(f, start=1):
            text = text.strip()
            if not text:
                continue
            row = text.split(delimiter) if delimiter else re.split(r"[\s,]+", text)
            if len(row) != len(_TXT_COLUMNS):
                raise ValueError(
                    f"{path}: line {number} has {len(row)} values, expected 4 ({' '.join(_TXT_COLUMNS)}): {text!r}"
                )
            records.append((number, row))
    if not records:
        raise ValueError(f"{path}: no data lines")
    return np.array([n for n, _ in records]), list(zip(*(row for _, row in records)))


def _numbers(texts: Sequence[str], lines: np.ndarray, path: Path, column: str) -> np.ndarray:
    """Parse a column of strings as float64 (N,); ValueError naming the first non-number's line."""
    try:
        return np.asarray(texts, dtype=np.float64)
    except ValueError:
        for text, line in zip(texts, lines):
            try:
                float(text)
            except ValueError:
                raise ValueError(f"{path}: column {column!r}, line {line}: {text!r} is not a number") from None
        raise


def _integers(
    texts: Sequence[str], lines: np.ndarray, path: Path, column: str, *, non_negative: bool = False
) -> np.ndarray:
    """Parse a column as int64 (N,): finite whole numbers (and >= 0 if asked), else ValueError naming the line."""
    values = _numbers(texts, lines, path, column)
    _reject(~np.isfinite(values) | (values != np.round(values)), texts, lines, path, column, "a whole number")
    if non_negative:
        _reject(values < 0, texts, lines, path, column, "non-negative")
    return values.astype(np.int64)


def _reject(bad: np.ndarray, texts: Sequence[str], lines: np.ndarray, path: Path, column: str, what: str) -> None:
    """ValueError naming the first row flagged in `bad` (N,) bool."""
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"{path}: column {column!r}, line {lines[i]}: {texts[i]!r} is not {what}")


def _check_finite(xy: np.ndarray, lines: np.ndarray, path: Path, columns: tuple[str, str]) -> None:
    """xy: (N, 2); ValueError naming the column and line of the first NaN/inf value."""
    bad = ~np.isfinite(xy)
    if bad.any():
        row, col = np.argwhere(bad)[0]
        raise ValueError(f"{path}: column {columns[col]!r}, line {lines[row]}: non-finite value {xy[row, col]}")


def _check_increasing(ped: np.ndarray, frame: np.ndarray, lines: np.ndarray, path: Path) -> None:
    """Frames must strictly increase, in file order, within each pedestrian (rows of pedestrians may interleave)."""
    order = np.argsort(ped, kind="stable")
    p, f, n = ped[order], frame[order], lines[order]
    bad = (p[1:] == p[:-1]) & (f[1:] <= f[:-1])
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(
            f"{path}: frames of pedestrian {p[i]} do not increase: frame {f[i + 1]} on line {n[i + 1]} "
            f"follows frame {f[i]} on line {n[i]}"
        )


def _dense(ped: np.ndarray, frame: np.ndarray, xy: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Long-format points (N,) -> positions (T, P, 2), mask (T, P), sorted pedestrian ids (P,)."""
    ids, column = np.unique(ped, return_inverse=True)
    T = int(frame.max()) + 1
    positions = np.zeros((T, len(ids), 2))
    mask = np.zeros((T, len(ids)), dtype=bool)
    positions[frame, column] = xy
    mask[frame, column] = True
    return positions, mask, ids


def _window(
    name: str, positions: np.ndarray, mask: np.ndarray, destinations: np.ndarray, ids: np.ndarray, time_unit: float
) -> Window:
    return Window(
        name=name,
        positions=torch.as_tensor(positions, dtype=torch.float32),
        mask=torch.as_tensor(mask),
        destinations=torch.as_tensor(destinations, dtype=torch.float32),
        time_unit=float(time_unit),
        ped_ids=torch.as_tensor(ids, dtype=torch.long),
    )


def _read_json(path: Path) -> dict:
    try:
        with path.open() as f:
            data = json.load(f)
    except ValueError as err:  # not JSON, or not text at all
        raise ValueError(f"{path}: not valid JSON ({err})") from err
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object at the top level, got {type(data).__name__}")
    return data


def _scene_constants(path: Path, name: str, layout: _Layout) -> dict:
    """scene_constants.json, checked to hold the time unit and the keys of scene `name` that loading reads."""
    constants = _read_json(path)
    keys = {"homography_M", "envsocial_diff_config", *(("image_size_px",) if layout.centred_y_up else ())}
    entry = constants.get(name)
    missing = [] if "time_unit_s" in constants else ["time_unit_s"]
    missing += [f"{name}.{k}" for k in sorted(keys - set(entry))] if isinstance(entry, dict) else [name]
    if missing:
        raise ValueError(f"{path}: missing {', '.join(missing)} (the crowds data set's scene constants)")
    return constants


def _sidecar_destinations(meta: dict, ids: np.ndarray, sidecar: Path) -> np.ndarray:
    """(P, 2): the last waypoint of each pedestrian's entry in the sidecar's "destinations" (indexed by ped_id)."""
    entries = meta.get("destinations")
    if not isinstance(entries, list):
        raise ValueError(f"{sidecar}: missing 'destinations' list (one list of [x, y, frame] waypoints per ped_id)")
    if len(entries) != len(ids) or ids[0] < 0 or ids[-1] >= len(entries):
        raise ValueError(
            f"{sidecar}: {len(entries)} destination entries for {len(ids)} pedestrians (ped_id {ids[0]}..{ids[-1]}) "
            "in the CSV; expected one entry per ped_id, indexed by ped_id"
        )
    try:
        last = np.array([entry[-1][:2] for entry in entries], dtype=np.float64)
    except (TypeError, IndexError, KeyError, ValueError) as err:
        raise ValueError(f"{sidecar}: 'destinations' must hold one list of [x, y, frame] waypoints per ped_id") from err
    if last.shape != (len(entries), 2):
        raise ValueError(f"{sidecar}: 'destinations' waypoints must be [x, y, frame], got shape {last.shape}")
    bad = ~np.isfinite(last).all(1)
    if bad.any():
        raise ValueError(f"{sidecar}: destination of pedestrian {int(np.argmax(bad))} is not finite")
    return last[ids]


def _sidecar_time_unit(meta: dict, sidecar: Path) -> float:
    value = meta.get("meta", {}).get("time_unit")
    if value is None:
        raise ValueError(f"{sidecar}: no meta.time_unit; pass time_unit= to load_window")
    return _check_time_unit(value)


def _check_time_unit(value: float) -> float:
    if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
        raise ValueError(f"time_unit: expected a positive number of seconds per frame, got {value!r}")
    return float(value)


def _check_mask(mask: torch.Tensor, shape: tuple[int, int]) -> torch.Tensor:
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or tuple(mask.shape) != tuple(shape):
        got = f"{mask.dtype} {tuple(mask.shape)}" if isinstance(mask, torch.Tensor) else type(mask).__name__
        raise ValueError(f"mask: expected a bool tensor of shape {tuple(shape)} (T, P), got {got}")
    return mask


# --- scenes ------------------------------------------------------------------------------------------------------


def _data_file(relative: str, root: str | Path | None) -> Path:
    """`<root>/crowds/<relative>`; FileNotFoundError naming the path and FLOWLAB_DATA when absent."""
    return datasets.path("crowds", relative, data_root=root)


def _window_names(scene: str, windows: str | Sequence[str]) -> tuple[str, ...]:
    splits = SPLITS[scene]
    available = tuple(sorted(w for names in splits.values() for w in names))
    if isinstance(windows, str):
        if windows == "all":
            return available
        if windows in splits:
            return splits[windows]
        windows = (windows,)
    unknown = [w for w in windows if w not in available]
    if unknown or not windows:
        raise ValueError(
            f"windows: unknown window(s) {unknown} for scene {scene!r}; expected a split "
            f"({', '.join(map(repr, ('all', *splits)))}) or window names ({', '.join(available)})"
        )
    return tuple(windows)


def _pixel_homography(constants: dict, layout: _Layout, frame: str) -> torch.Tensor:
    """(3, 3) float64: image pixel (u, v, 1) -> metres in `frame`, the scene homography after the annotation map.

    UCY annotations are (u - W/2, H/2 - v) (y up) in the published frame; the corrected frame feeds the
    homography (u - W/2, v - H/2), the convention it was fitted in.
    """
    M = torch.tensor(constants["homography_M"], dtype=torch.float64)
    if not layout.centred_y_up:
        return M
    width, height = constants["image_size_px"]
    flip = -1.0 if frame == "published" else 1.0
    to_annotation = torch.tensor(
        [[1.0, 0.0, -width / 2], [0.0, flip, -flip * height / 2], [0.0, 0.0, 1.0]], dtype=torch.float64
    )
    return M @ to_annotation


def _apply_homography(H: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    """points (..., 2) -> dehomog(H [x, y, 1]) (..., 2), computed in float64, returned in the input's dtype."""
    h = H.to(device=points.device, dtype=torch.float64)
    p = points.to(torch.float64)
    mapped = p @ h[:2, :2].T + h[:2, 2]
    w = p @ h[2, :2] + h[2, 2]
    return (mapped / w.unsqueeze(-1)).to(points.dtype)


def _check_points(points: torch.Tensor, name: str) -> torch.Tensor:
    check_tensor(points, name)
    if points.shape[-1] != 2 or not points.is_floating_point():
        raise ValueError(f"{name}: expected a float tensor of shape (..., 2), got {points.dtype} {tuple(points.shape)}")
    return points


def _transform_window(window: Window, H: torch.Tensor) -> Window:
    """Map a window's positions and destinations through the metric-to-metric homography H (3, 3)."""
    positions = _apply_homography(H, window.positions) * window.mask.unsqueeze(-1)
    return replace(window, positions=positions, destinations=_apply_homography(H, window.destinations))


def _boxes(entries: list, H: torch.Tensor, where: str) -> Boxes:
    """Annotation boxes {category, description, bbox: [cx, cy, w, h, theta]} (pixels, centre convention) -> Boxes.

    Corners: centre + R(theta) (±w/2, ±h/2), with R rotating +u towards +v in the pixel frame (our reading of
    theta; the README verifies the centre convention, not the rotation sense).
    """
    try:
        bbox = torch.tensor([entry["bbox"] for entry in entries], dtype=torch.float64).reshape(len(entries), 5)
        categories = tuple(str(entry["category"]) for entry in entries)
        descriptions = tuple(str(entry.get("description", "")) for entry in entries)
    except (TypeError, KeyError, ValueError, RuntimeError) as err:
        raise ValueError(f"{where}: expected entries with 'category' and 'bbox' [cx, cy, w, h, theta] ({err})") from err
    centre, size, theta = bbox[:, :2], bbox[:, 2:4], bbox[:, 4]
    signs = torch.tensor([[-1.0, -1.0], [1.0, -1.0], [1.0, 1.0], [-1.0, 1.0]], dtype=torch.float64)
    cos, sin = theta.cos(), theta.sin()
    rotation = torch.stack([torch.stack([cos, -sin], -1), torch.stack([sin, cos], -1)], -2)  # (M, 2, 2)
    corners = centre.unsqueeze(1) + (signs * size.unsqueeze(1) / 2) @ rotation.transpose(-1, -2)
    return Boxes(
        corners=_apply_homography(H, corners).float(),
        centres=_apply_homography(H, centre).float(),
        categories=categories,
        descriptions=descriptions,
    )


def _boundary(flat: list, H: torch.Tensor, path: Path) -> torch.Tensor:
    """The flat pixel list [u1, v1, u2, v2, ...] -> (B, 2) float32 metres."""
    if len(flat) % 2:
        raise ValueError(f"{path}: 'boundary_line' must hold pixel pairs u, v; got {len(flat)} numbers")
    return _apply_homography(H, torch.tensor(flat, dtype=torch.float64).reshape(-1, 2)).float()


def _read_image(path: Path) -> np.ndarray:
    """(H, W, 3) uint8 RGB image."""
    from matplotlib.image import imread

    try:
        image = np.asarray(imread(path))
    except (OSError, SyntaxError, ValueError) as err:  # PIL's errors on a corrupt or foreign file
        raise ValueError(f"{path}: not a readable image ({err})") from err
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(f"{path}: expected an 8-bit RGB image, got {image.dtype} {image.shape}")
    return image
