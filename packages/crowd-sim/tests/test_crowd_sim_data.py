"""Crowd loaders: synthetic round trips, clear errors on bad files, and the shipped UCY/GC scenes (skipped without)."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest
import torch

from flowlab.crowd_sim.data import (
    SCENES,
    SPLITS,
    Window,
    load_scene,
    load_window,
    read_pedestrian_txt,
    write_pedestrian_txt,
)

ROOT = Path(os.environ.get("FLOWLAB_DATA", "/nonexistent"))
needs_data = pytest.mark.skipif(not (ROOT / "crowds").is_dir(), reason=f"crowds data set not found under {ROOT}")

# pedestrian -> (first, last) frame of a synthetic 12-frame window; pedestrian 3 is present alone at the end
SPANS = {0: (0, 11), 1: (2, 7), 2: (5, 5), 3: (9, 11)}


def synthetic_window() -> Window:
    g = torch.Generator().manual_seed(0)
    T, P = 12, len(SPANS)
    positions = torch.randn(T, P, 2, generator=g).cumsum(0)
    mask = torch.zeros(T, P, dtype=torch.bool)
    for p, (first, last) in SPANS.items():
        mask[first : last + 1, p] = True
    positions = positions * mask.unsqueeze(-1)
    last = torch.tensor([span[1] for span in SPANS.values()])
    return Window("synthetic", positions, mask, positions[last, torch.arange(P)], 0.08, torch.arange(P))


def write_shared_window(window: Window, folder: Path, *, rows=None, destinations=None) -> Path:
    """Write `window` in the shared CSV + JSON sidecar format (rows: override the CSV rows)."""
    t, p = window.mask.nonzero(as_tuple=True)
    order = torch.argsort(p * window.num_frames + t)  # grouped by pedestrian, frames increasing
    if rows is None:
        rows = [
            [int(window.ped_ids[p[i]]), int(t[i]), f"{float(t[i]) * 0.08:.2f}", *window.positions[t[i], p[i]].tolist()]
            for i in order
        ]
    path = folder / "window.csv"
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["ped_id", "frame", "t_seconds", "x", "y"])
        writer.writerows(rows)
    if destinations is None:
        last = window.last_frame
        destinations = [[[*window.destinations[q].tolist(), int(last[q])]] for q in range(window.num_pedestrians)]
    sidecar = {"meta": {"time_unit": window.time_unit}, "destinations": destinations}
    path.with_suffix(".json").write_text(json.dumps(sidecar))
    return path


def assert_same_window(a: Window, b: Window) -> None:
    assert torch.equal(a.mask, b.mask)
    assert torch.equal(a.positions, b.positions)
    assert torch.equal(a.destinations, b.destinations)
    assert torch.equal(a.ped_ids, b.ped_ids)
    assert a.time_unit == pytest.approx(b.time_unit)


# --- Window ------------------------------------------------------------------------------------------------------


def test_window_frame_range_velocities_and_subset():
    w = synthetic_window()
    assert w.first_frame.tolist() == [s[0] for s in SPANS.values()]
    assert w.last_frame.tolist() == [s[1] for s in SPANS.values()]
    v = w.velocities()
    step = (w.positions[3] - w.positions[2])[1] / 0.08
    assert torch.allclose(v[2, 1], step)
    assert torch.equal(v[7, 1], v[6, 1])  # last frame repeats the previous velocity
    assert torch.equal(v[5, 2], torch.zeros(2))  # single-frame pedestrian
    assert not v[~w.mask].any()
    sub = w.subset(slice(0, 8, 2))
    assert sub.ped_ids.tolist() == [0, 1]  # 2 is present at frame 5 only, 3 from frame 9
    assert sub.time_unit == pytest.approx(0.16)
    assert torch.equal(sub.positions, w.positions[0:8:2, :2])


def test_window_rejects_bad_shapes():
    w = synthetic_window()
    with pytest.raises(ValueError, match="mask"):
        Window("bad", w.positions, w.mask.float(), w.destinations, 0.08, w.ped_ids)
    with pytest.raises(ValueError, match="destinations"):
        Window("bad", w.positions, w.mask, w.destinations[:2], 0.08, w.ped_ids)
    with pytest.raises(ValueError, match="time_unit"):
        Window("bad", w.positions, w.mask, w.destinations, 0.0, w.ped_ids)
    with pytest.raises(ValueError, match="frames"):
        w.subset(slice(20, 30))


# --- shared CSV + JSON format ------------------------------------------------------------------------------------


def test_shared_window_round_trip(tmp_path):
    window = synthetic_window()
    loaded = load_window(write_shared_window(window, tmp_path))
    assert loaded.name == "window"
    assert_same_window(loaded, window)


def test_shared_window_missing_files(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"nowhere\.csv"):
        load_window(tmp_path / "nowhere.csv")
    path = write_shared_window(synthetic_window(), tmp_path)
    path.with_suffix(".json").unlink()
    with pytest.raises(FileNotFoundError, match="sidecar"):
        load_window(path)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ([0, 1, "0.08", "nan", "1.0"], r"column 'x', line 3: non-finite"),
        ([0, 1, "0.08", "1.0", "inf"], r"column 'y', line 3: non-finite"),
        ([0, "1.5", "0.08", "1.0", "1.0"], r"column 'frame', line 3: '1.5' is not a whole number"),
        ([0, -1, "0.08", "1.0", "1.0"], r"column 'frame', line 3: '-1' is not non-negative"),
        ([0, 1, "0.08", "one", "1.0"], r"column 'x', line 3: 'one' is not a number"),
        ([0, 0, "0.00", "1.0", "1.0"], r"frames of pedestrian 0 do not increase: frame 0 on line 3"),
        ([0, 1, "1.0", "1.0"], r"line 3 has 4 fields, expected 5"),
    ],
)
def test_shared_window_bad_rows(tmp_path, row, message):
    rows = [[0, 0, "0.00", "0.0", "0.0"], row]
    with pytest.raises(ValueError, match=message):
        load_window(write_shared_window(synthetic_window(), tmp_path, rows=rows, destinations=[[[0.0, 0.0, 1]]]))


def test_shared_window_missing_column(tmp_path):
    path = tmp_path / "w.csv"
    path.write_text("ped_id,frame,t_seconds,x\n0,0,0.0,1.0\n")
    path.with_suffix(".json").write_text(json.dumps({"destinations": [[[1.0, 1.0, 0]]]}))
    with pytest.raises(ValueError, match=r"missing column\(s\) 'y'"):
        load_window(path, time_unit=0.08)


def test_shared_window_destination_count_mismatch(tmp_path):
    window = synthetic_window()
    with pytest.raises(ValueError, match="3 destination entries for 4 pedestrians"):
        load_window(write_shared_window(window, tmp_path, destinations=[[[0.0, 0.0, 1]]] * 3))


# --- 4-column text format ----------------------------------------------------------------------------------------


def test_pedestrian_txt_round_trip(tmp_path):
    window = synthetic_window()
    loaded = read_pedestrian_txt(write_pedestrian_txt(window, tmp_path / "crowd.txt"), time_unit=0.08)
    assert loaded.name == "crowd"
    assert_same_window(loaded, window)


def test_pedestrian_txt_frame_step_interleaving_and_commas(tmp_path):
    path = tmp_path / "eth.txt"
    path.write_text("780.0, 1.0, 1.0, 2.0\n780.0,2.0,5.0,5.0\n790, 1, 1.5, 2.0\n\n810 1 2.5 2.0\n")
    w = read_pedestrian_txt(path)
    assert w.num_frames == 4  # frames 780, 790, (800), 810 at step 10
    assert w.ped_ids.tolist() == [1, 2]
    assert w.mask[:, 0].tolist() == [True, True, False, True]
    assert w.destinations.tolist() == [[2.5, 2.0], [5.0, 5.0]]
    assert w.time_unit == pytest.approx(0.4)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0 1 1.0 2.0 7\n", "line 1 has 5 values, expected 4"),
        ("0 1 1.0 2.0\n10 1 nan 2.0\n", "column 'x', line 2: non-finite"),
        ("0 1 1.0 2.0\n10 1 1.0 y\n", "column 'y', line 2: 'y' is not a number"),
        ("10 1 1.0 2.0\n10 2 1.0 2.0\n0 1 1.0 2.0\n", "frames of pedestrian 1 do not increase: frame 0 on line 3"),
        ("", "no data lines"),
    ],
)
def test_pedestrian_txt_errors(tmp_path, text, message):
    path = tmp_path / "bad.txt"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        read_pedestrian_txt(path)


def test_pedestrian_txt_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"missing\.txt"):
        read_pedestrian_txt(tmp_path / "missing.txt")


# --- scenes ------------------------------------------------------------------------------------------------------


def test_load_scene_rejects_unknown_names(tmp_path):
    with pytest.raises(ValueError, match=r"unknown scene 'eth'.*'ucy_students03', 'gc'"):
        load_scene("eth", tmp_path)
    with pytest.raises(ValueError, match=r"unknown window\(s\) \['time999'\].*time162-216"):
        load_scene("ucy_students03", tmp_path, windows=["time999"])
    with pytest.raises(ValueError, match="frame"):
        load_scene("gc", tmp_path, frame="rectified")
    with pytest.raises(FileNotFoundError, match="FLOWLAB_DATA"):
        load_scene("gc", tmp_path)
    assert set(SPLITS) == set(SCENES)
    assert sum(len(names) for names in SPLITS["gc"].values()) == 13


@pytest.fixture(scope="module")
def gc():
    return load_scene("gc", windows="test")


@pytest.fixture(scope="module")
def ucy():
    return load_scene("ucy_students03", windows="test")


@needs_data
def test_ucy_test_window(ucy):
    window = ucy.windows["time162-216"]
    assert (window.num_pedestrians, window.num_frames) == (107, 676)
    assert ucy.image is None and ucy.frame == "published"
    assert (len(ucy.obstacles.categories), len(ucy.interests.categories)) == (4, 2)
    assert ucy.boundary.shape == (12, 2)
    # destinations are the exit points of the window (README)
    last = window.positions[window.last_frame, torch.arange(window.num_pedestrians)]
    assert torch.equal(window.destinations, last)


@needs_data
def test_gc_boxes_in_metres(gc):
    assert gc.windows.keys() == set(SPLITS["gc"]["test"])
    assert (len(gc.obstacles.categories), len(gc.interests.categories)) == (3, 3)
    assert gc.obstacles.corners.shape == (3, 4, 2) and gc.interests.centres.shape == (3, 2)
    centres = torch.cat([gc.obstacles.centres, gc.interests.centres])
    assert bool((centres.abs() < 60).all())
    # the annotated glass display stand is the information desk the sidecars give as a circle (README)
    assert "central" in gc.obstacles.categories[0]
    assert torch.linalg.norm(gc.obstacles.centres[0] - torch.tensor([13.5999, 11.29986])) < 0.5
    assert gc.image is not None and gc.image.shape == (1080, 1920, 3)


@needs_data
def test_gc_tracks_fall_on_the_image_and_pixels_round_trip(gc):
    window = gc.windows["time2344-2404"]
    uv = gc.metres_to_pixel(window.positions[window.mask].double())
    assert bool(((uv >= 0) & (uv <= torch.tensor([1920.0, 1080.0]))).all())
    assert torch.allclose(gc.pixel_to_metres(uv), window.positions[window.mask].double(), atol=1e-9)
    boundary_px = gc.metres_to_pixel(gc.boundary.double())
    assert torch.allclose(gc.pixel_to_metres(boundary_px), gc.boundary.double(), atol=1e-9)


def top_bottom_speed_ratio(scene) -> float:
    """Median speed of moving pedestrians in the top third of the image over that in the bottom third."""
    window = next(iter(scene.windows.values()))
    speed = window.velocities().norm(dim=-1)[window.mask]
    v = scene.metres_to_pixel(window.positions[window.mask])[:, 1]
    moving = speed > 0.3
    top, bottom = moving & (v < 576 / 3), moving & (v > 2 * 576 / 3)
    return float(speed[top].median() / speed[bottom].median())


@needs_data
def test_ucy_corrected_frame_has_uniform_speeds(ucy):
    corrected = load_scene("ucy_students03", windows="test", frame="corrected")
    assert top_bottom_speed_ratio(ucy) < 0.65  # README: ~0.48 over all windows
    assert top_bottom_speed_ratio(corrected) > 0.8  # README: ~0.95
    # boxes and tracks move together: pixels are the same in both frames
    uv = torch.tensor([[90.0, 130.0], [360.0, 288.0]], dtype=torch.float64)
    assert torch.allclose(corrected.metres_to_pixel(corrected.pixel_to_metres(uv)), uv)
    w0, w1 = ucy.windows["time162-216"], corrected.windows["time162-216"]
    assert torch.allclose(ucy.metres_to_pixel(w0.positions[w0.mask]), corrected.metres_to_pixel(w1.positions[w1.mask]))
