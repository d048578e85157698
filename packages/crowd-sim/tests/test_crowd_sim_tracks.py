"""Scenes from a user's own tracks: the 4-column and package formats, annotations, estimated constants, errors."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from flowlab.crowd_sim.data import Scene, Window
from flowlab.crowd_sim.envsocial_diff.baselines import constant_velocity
from flowlab.crowd_sim.envsocial_diff.model import SIZES
from flowlab.crowd_sim.envsocial_diff.simulator import EnvSocialDiff, scene_config
from flowlab.crowd_sim.simulate import simulate_window
from flowlab.crowd_sim.tracks import PAPER_CONSTANTS, estimate_constants, scene_from_tracks

SPEEDS = (0.8, 1.0, 1.2, 1.4, 1.6, 2.6)  # m/s, one pedestrian per speed; the last faster than the paper's 2.0
STEPS = 12  # recorded points per pedestrian
DT = 0.4  # s between points (2.5 fps)


def straight_tracks(path, *, frame_step: int = 10):
    """Write SPEEDS pedestrians walking along +x (pedestrian p on y = p, entering at point p) as "frame ped x y" lines
    with frame numbers stepping by `frame_step` from 100; return the path."""
    lines = []
    for p, speed in enumerate(SPEEDS):
        for k in range(STEPS):
            frame = 100 + (p + k) * frame_step
            lines.append(f"{frame}\t{p + 1}\t{speed * DT * k:.6f}\t{float(p):.6f}")
    path.write_text("\n".join(sorted(lines, key=lambda line: int(line.split()[0]))) + "\n")
    return path


def package_window(folder, stem: str = "own", *, time_unit: float | None = 0.08):
    """Write a tiny window in the package's CSV + JSON sidecar format (2 pedestrians, 4 frames); return the CSV."""
    rows = ["ped_id,frame,t_seconds,x,y"]
    rows += [f"0,{f},{f * 0.08:.2f},{0.1 * f},0.0" for f in range(4)]
    rows += [f"1,{f},{f * 0.08:.2f},1.0,{0.1 * f}" for f in range(1, 3)]
    (folder / f"{stem}.csv").write_text("\n".join(rows) + "\n")
    meta = {} if time_unit is None else {"time_unit": time_unit}
    sidecar = {"meta": meta, "destinations": [[[0.3, 0.0, 3]], [[1.0, 5.0, 2]]]}
    (folder / f"{stem}.json").write_text(json.dumps(sidecar))
    return folder / f"{stem}.csv"


def test_four_column_file_at_fps(tmp_path):
    scene = scene_from_tracks(straight_tracks(tmp_path / "walk.txt"), fps=2.5)
    assert scene.name == "walk" and scene.frame == "published" and math.isclose(scene.time_unit, 0.4)
    window = scene.windows["walk"]
    P = len(SPEEDS)
    assert window.positions.shape == (P + STEPS - 1, P, 2) and window.time_unit == scene.time_unit
    assert window.ped_ids.tolist() == list(range(1, P + 1))
    for p, speed in enumerate(SPEEDS):
        frames = torch.arange(p, p + STEPS)
        assert window.mask[:, p].nonzero().flatten().tolist() == frames.tolist()
        expected = torch.stack([speed * DT * torch.arange(STEPS), torch.full((STEPS,), float(p))], -1)
        torch.testing.assert_close(window.positions[frames, p], expected.float())
        torch.testing.assert_close(window.destinations[p], expected[-1].float())
        torch.testing.assert_close(window.velocities()[frames[:-1], p, 0], torch.full((STEPS - 1,), speed))
    assert scene.obstacles.corners.shape == (0, 4, 2) and scene.interests.centres.shape == (0, 2)
    assert scene.boundary.shape == (0, 2) and scene.image is None
    torch.testing.assert_close(scene.homography, torch.eye(3, dtype=torch.float64))


def test_time_unit_equals_one_over_fps_and_from_tracks_delegates(tmp_path):
    path = straight_tracks(tmp_path / "walk.csv")
    a = Scene.from_tracks(path, time_unit=0.4, name="mine")
    b = scene_from_tracks([path], fps=2.5)
    assert a.name == "mine" and a.time_unit == pytest.approx(b.time_unit)
    torch.testing.assert_close(a.windows["walk"].positions, b.windows["walk"].positions)


def test_max_speed_estimate_covers_the_fastest_walker(tmp_path):
    scene = scene_from_tracks(straight_tracks(tmp_path / "walk.txt"), fps=2.5)
    assert scene.constants["max_speed"] >= max(SPEEDS) >= 2.0
    assert {k: v for k, v in scene.constants.items() if k != "max_speed"} == {
        k: v for k, v in PAPER_CONSTANTS.items() if k != "max_speed"
    }
    slow = Window("slow", torch.zeros(3, 1, 2), torch.ones(3, 1, dtype=torch.bool), torch.zeros(1, 2), 0.4,
                  torch.arange(1))  # fmt: skip
    assert estimate_constants([slow])["max_speed"] == 2.0  # never below the paper's value
    assert estimate_constants({})["max_speed"] == 2.0  # no data: the paper's value


def test_scene_file_boxes_boundary_image_and_constants(tmp_path):
    from PIL import Image

    Image.fromarray(np.full((8, 10, 3), 200, dtype=np.uint8)).save(tmp_path / "floor.jpg")
    corners = [[1.0, 1.0], [3.0, 1.0], [3.0, 2.0], [1.0, 2.0]]
    notes = {
        "obstacles": [{"category": "bench", "description": "a bench", "corners": corners}],
        "interests": [{"category": "kiosk", "bbox": [5.0, 6.0, 2.0, 1.0, math.pi / 2]}],
        "boundary": [[0, 0], [10, 0], [10, 10]],
        "homography": [[0.5, 0, 0], [0, -0.5, 4], [0, 0, 1]],
        "image": "floor.jpg",
        "constants": {"max_speed": 3.5, "topk_ped": 4},
    }
    (tmp_path / "scene.json").write_text(json.dumps(notes))
    scene = scene_from_tracks(straight_tracks(tmp_path / "walk.txt"), fps=2.5, annotations=tmp_path / "scene.json")
    assert scene.obstacles.corners.shape == (1, 4, 2) and scene.interests.corners.shape == (1, 4, 2)
    torch.testing.assert_close(scene.obstacles.corners[0], torch.tensor(corners))
    torch.testing.assert_close(scene.obstacles.centres[0], torch.tensor([2.0, 1.5]))
    assert scene.obstacles.categories == ("bench",) and scene.obstacles.descriptions == ("a bench",)
    rotated = torch.tensor([[5.5, 5.0], [5.5, 7.0], [4.5, 7.0], [4.5, 5.0]])  # 2 x 1 box turned by 90 degrees
    torch.testing.assert_close(scene.interests.corners[0], rotated)
    torch.testing.assert_close(scene.interests.centres[0], torch.tensor([5.0, 6.0]))
    assert scene.interests.descriptions == ("",)
    assert scene.boundary.shape == (3, 2) and scene.image.shape == (8, 10, 3)
    torch.testing.assert_close(scene.pixel_to_metres(torch.tensor([[2.0, 2.0]])), torch.tensor([[1.0, 3.0]]))
    assert scene.constants["max_speed"] == 3.5 and scene.constants["topk_ped"] == 4


def test_package_format_with_sidecar_and_duplicate_stems(tmp_path):
    (tmp_path / "b").mkdir()
    first, second = package_window(tmp_path), package_window(tmp_path / "b")
    scene = scene_from_tracks([first, second])
    assert list(scene.windows) == ["own", "own_2"] and scene.name == "own" and scene.time_unit == 0.08
    window = scene.windows["own_2"]
    assert window.name == "own_2" and window.mask.sum(0).tolist() == [4, 2]
    torch.testing.assert_close(window.destinations, torch.tensor([[0.3, 0.0], [1.0, 5.0]]))
    assert scene_from_tracks(first, fps=12.5).time_unit == pytest.approx(0.08)  # agrees with the sidecar


def test_package_window_and_four_column_file_in_one_scene(tmp_path):
    scene = scene_from_tracks([package_window(tmp_path), straight_tracks(tmp_path / "walk.txt", frame_step=1)],
                              time_unit=0.08)  # fmt: skip
    assert list(scene.windows) == ["own", "walk"] and scene.time_unit == 0.08


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"fps": 2.5, "time_unit": 0.4}, "give one of them"),
        ({}, "pass fps="),
        ({"fps": 0}, "fps: expected a positive number"),
    ],
)
def test_time_unit_arguments_are_checked(tmp_path, kwargs, message):
    with pytest.raises(ValueError, match=message):
        scene_from_tracks(straight_tracks(tmp_path / "walk.txt"), **kwargs)


def test_missing_and_unsupported_files(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"nope\.txt"):
        scene_from_tracks(tmp_path / "nope.txt", fps=2.5)
    (tmp_path / "walk.dat").write_text("0 1 0.0 0.0\n")
    with pytest.raises(ValueError, match=r"\.txt or \.csv"):
        scene_from_tracks(tmp_path / "walk.dat", fps=2.5)
    with pytest.raises(ValueError, match="none"):
        scene_from_tracks([], fps=2.5)
    with pytest.raises(FileNotFoundError, match=r"missing\.json"):
        scene_from_tracks(straight_tracks(tmp_path / "walk.txt"), fps=2.5, annotations=tmp_path / "missing.json")


def test_mismatched_time_units(tmp_path):
    (tmp_path / "b").mkdir()
    own, other = package_window(tmp_path), package_window(tmp_path / "b", time_unit=0.1)
    with pytest.raises(ValueError, match="time units differ"):
        scene_from_tracks([own, other])
    with pytest.raises(ValueError, match=r"meta\.time_unit is 0\.08 s, but fps / time_unit gives 0\.4"):
        scene_from_tracks([own, straight_tracks(tmp_path / "walk.txt")], fps=2.5)
    with pytest.raises(ValueError, match=r"no meta\.time_unit"):
        scene_from_tracks(package_window(tmp_path, "bare", time_unit=None))


@pytest.mark.parametrize(
    ("notes", "message"),
    [
        ({"obstacle": []}, r"unknown key\(s\) \['obstacle'\]; expected some of obstacles, interests"),
        ({"interests": [{"category": "kiosk", "bbox": [1, 2, 3, 4]}]}, r"'interests'\[0\]: 'bbox'.*got shape \(4,\)"),
        ({"obstacles": [{"category": "bench"}]}, r"'obstacles'\[0\]: give exactly one of 'corners'"),
        ({"obstacles": [{"bbox": [1, 2, 3, 4, 0]}]}, r"'obstacles'\[0\]: 'category' must be"),
        ({"obstacles": [{"category": "a", "corners": [[0, 0]] * 3}]}, r"'corners'.*expected 4 x 2"),
        ({"interests": [{"category": "a", "bbox": [0, 0, -1, 1, 0]}]}, "width and height must be positive"),
        ({"boundary": [[0, 0, 1]]}, r"'boundary'.*expected n x 2"),
        ({"homography": [[1, 0, 0], [0, 1, 0], [0, 0, 0]]}, "singular"),
        ({"constants": {"max_sped": 2.0}}, r"unknown constant\(s\) \['max_sped'\]"),
        ({"constants": {"topk_ped": 2.5}}, "'topk_ped' must be a positive integer"),
        ({"image": "absent.jpg"}, r"'image': image not found"),
    ],
)
def test_bad_annotations_name_file_and_key(tmp_path, notes, message):
    (tmp_path / "scene.json").write_text(json.dumps(notes))
    with pytest.raises((ValueError, FileNotFoundError), match=message) as err:
        scene_from_tracks(straight_tracks(tmp_path / "walk.txt"), fps=2.5, annotations=tmp_path / "scene.json")
    assert "scene.json" in str(err.value)


def test_user_scene_runs_through_the_simulator_and_the_model(tmp_path):
    notes = {
        "obstacles": [{"category": "bench", "corners": [[1, 1], [3, 1], [3, 2], [1, 2]]}],
        "interests": [{"category": "kiosk", "bbox": [5, 6, 2, 1, 0]}],
    }
    scene = scene_from_tracks(straight_tracks(tmp_path / "walk.txt"), fps=2.5, annotations=notes)
    window = scene.windows["walk"]
    roll = simulate_window(scene, window, constant_velocity, steps=8)
    assert roll.positions.shape == (1, 9, len(SPEEDS), 2) and torch.isfinite(roll.positions).all()
    env = EnvSocialDiff(scene_config(SIZES["quick"], "full", scene)).environment(scene)
    assert env.corners.shape == (2, 4, 2) and env.kind.tolist() == [0, 1] and env.cells.shape == (0, 2)
