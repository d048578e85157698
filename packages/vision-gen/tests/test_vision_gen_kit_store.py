"""The kit's model store: a weights round trip is exact; a missing folder or file, a config of another format or
version, unreadable or mismatched weights and NaN weights each give one ValueError naming the argument."""

from __future__ import annotations

import json

import pytest
import torch

from flowlab.vision_gen.kit.store import load_weights, read_config, save_weights

KW = {"format": "test.model", "version": 2, "files": ("w.safetensors",), "what": "test model",
      "command": "flowlab test train", "name": "--model"}  # fmt: skip


def _folder(tmp_path, meta=None):
    net = torch.nn.Linear(3, 2)
    save_weights(net, tmp_path / "w.safetensors")
    (tmp_path / "config.json").write_text(json.dumps(meta or {"format": "test.model", "version": 2}))
    return net


def test_weights_round_trip_exactly(tmp_path):
    net = _folder(tmp_path)
    other = torch.nn.Linear(3, 2)
    load_weights(other, tmp_path / "w.safetensors", "--model")
    assert all(torch.equal(a, b) for a, b in zip(net.state_dict().values(), other.state_dict().values(), strict=True))
    assert read_config(tmp_path, **KW) == {"format": "test.model", "version": 2}


def test_bad_folders_and_files_are_named(tmp_path):
    with pytest.raises(ValueError, match=r"^--model: .* is not a folder written by `flowlab test train`"):
        read_config(tmp_path / "nowhere", **KW)
    _folder(tmp_path, {"format": "test.model", "version": 1})
    with pytest.raises(ValueError, match=r"^--model: .*config.json is not a test model config \(expected format"):
        read_config(tmp_path, **KW)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"^--model: .*config.json is not a test model config"):
        read_config(tmp_path, **KW)
    (tmp_path / "w.safetensors").unlink()
    with pytest.raises(ValueError, match=r"^--model: .* is not a saved test model \(no w.safetensors\)"):
        read_config(tmp_path, **KW)


def test_mismatched_corrupt_and_nan_weights_are_refused(tmp_path):
    _folder(tmp_path)
    with pytest.raises(ValueError, match=r"^--model: .*w.safetensors does not hold this model's weights"):
        load_weights(torch.nn.Linear(4, 2), tmp_path / "w.safetensors", "--model")
    (tmp_path / "bad.safetensors").write_bytes(b"garbage")
    with pytest.raises(ValueError, match=r"does not hold this model's weights"):
        load_weights(torch.nn.Linear(3, 2), tmp_path / "bad.safetensors", "--model")
    nan = torch.nn.Linear(3, 2)
    with torch.no_grad():
        nan.weight[0, 0] = float("nan")
    save_weights(nan, tmp_path / "nan.safetensors")
    with pytest.raises(ValueError, match=r"^--model: .*nan.safetensors holds NaN or infinite weights"):
        load_weights(torch.nn.Linear(3, 2), tmp_path / "nan.safetensors", "--model")
