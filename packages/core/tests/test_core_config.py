"""Typed configs: fields checked against their annotations, unknown keys refused, TOML-shaped round trips."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

import pytest

from flowlab.core.config import Config


@dataclass(frozen=True)
class Net(Config):
    hidden: tuple[int, ...] = (64, 64)
    act: Literal["silu", "relu"] = "silu"


@dataclass(frozen=True)
class Run(Config):
    steps: int = 100
    lr: float = 1e-3
    name: str = "run"
    ema: float | None = None
    verbose: bool = False
    pair: tuple[int, float] = (1, 0.5)
    weights: Mapping[str, float] = field(default_factory=dict)
    net: Net = field(default_factory=Net)
    out: Path | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.steps < 1:
            raise ValueError(f"steps: expected a positive int, got {self.steps}")


def test_fields_are_checked_against_their_annotations():
    Run(lr=1, ema=0.9, weights={"a": 2}, net=Net(hidden=()), pair=(3, 4))  # an int is a float; () a tuple[int, ...]
    bad = {
        "steps": 1.5,
        "lr": "fast",
        "verbose": 1,
        "name": None,
        "ema": "0.9",
        "pair": (1, 2, 3),
        "weights": {"a": "b"},
        "net": {"hidden": (1,)},
        "out": 3,
    }
    for name, value in bad.items():
        with pytest.raises(ValueError, match=rf"^Run\.{name}: expected "):
            Run(**{name: value})
    with pytest.raises(ValueError, match=r"^Net\.hidden: expected tuple\[int, \.\.\.\], got \[1, 2\]"):
        Net(hidden=[1, 2])
    with pytest.raises(ValueError, match=r"^Net\.act: expected Literal\['silu', 'relu'\], got 'gelu'"):
        Net(act="gelu")
    with pytest.raises(ValueError, match=r"^Run\.steps: expected "):
        Run(steps=True)  # a bool is not an int here
    with pytest.raises(ValueError, match=r"^steps: expected a positive int"):  # the subclass's own range check
        Run(steps=0)


def test_replace_with_a_misspelt_field_is_an_error():
    with pytest.raises(TypeError, match="stpes"):
        replace(Run(), stpes=10)
    assert replace(Run(), steps=7).steps == 7


def test_from_mapping_reads_a_toml_table_and_refuses_unknown_keys(tmp_path):
    text = 'steps = 5\nlr = 0.01\npair = [2, 0.25]\nout = "x/y"\n'
    text += '[net]\nhidden = [8, 8]\nact = "relu"\n[weights]\na = 1.0\n'
    (tmp_path / "run.toml").write_text(text)
    run = Run.from_mapping(tomllib.loads((tmp_path / "run.toml").read_text()))
    assert run == Run(steps=5, lr=0.01, pair=(2, 0.25), out=Path("x/y"), net=Net((8, 8), "relu"), weights={"a": 1.0})
    with pytest.raises(ValueError, match=r"^Run: unknown key\(s\) \['setps'\]"):
        Run.from_mapping({"setps": 5})
    with pytest.raises(ValueError, match=r"^Net: unknown key\(s\) \['width'\]"):
        Run.from_mapping({"net": {"width": 5}})
    with pytest.raises(ValueError, match=r"^Run: expected a mapping"):
        Run.from_mapping([("steps", 5)])


def test_to_dict_is_json_ready_and_round_trips():
    run = Run(steps=3, pair=(1, 2.0), net=Net((4,)), out=Path("a"), weights={"x": 0.5})
    data = json.loads(json.dumps(run.to_dict()))
    assert data["net"] == {"hidden": [4], "act": "silu"} and data["out"] == "a"
    assert Run.from_mapping(data) == run
