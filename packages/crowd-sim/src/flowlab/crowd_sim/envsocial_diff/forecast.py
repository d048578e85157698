"""The standard trajectory-forecasting protocol (Social-GAN / Trajectron++), batched: observe 8 frames at 2.5 fps
(3.2 s), sample k futures of 12 frames (4.8 s), minADE / minFDE over the k samples.

Sequences (Social-GAN's windowing): every `observe + horizon` consecutive frames of a window, starting at every
`skip`-th frame; a sequence's pedestrians are those present at all of its frames, and a sequence counts when it has at
least `min_pedestrians` of them (Social-GAN: more than one). Only they take part, as each other's neighbours too, as
in Social-GAN's loader. Every sequence of every window is one group of a block-diagonal graph: one `simulate` call
forecasts them all (`predict(..., groups=...)`), the only Python loop being over time.

A forecast file (`flowlab crowd predict --protocol forecast`) is a torch file of `forecast_to_blob`: the sequences
and the sampled futures, scored later by `score_forecast` without the data.

`resample` brings a window recorded at another rate (the shipped scenes: 0.08 s) to the protocol's 0.4 s by keeping
every n-th frame.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields

import torch

from flowlab.crowd_sim.data import Window
from flowlab.crowd_sim.envsocial_diff.predict import predict
from flowlab.crowd_sim.metrics import min_ade, min_fde
from flowlab.crowd_sim.simulate import Policy

__all__ = [
    "FORECAST_FORMAT",
    "PROTOCOL_TIME_UNIT",
    "ForecastSequences",
    "evaluate_forecast",
    "forecast_problem",
    "forecast_sequences",
    "forecast_to_blob",
    "resample",
    "sample_forecast",
    "score_forecast",
    "sequences_of",
]

#: the `format` entry of a forecast file (`forecast_to_blob`)
FORECAST_FORMAT = "flowlab.crowd_sim.forecast/1"

#: seconds per frame of the protocol (2.5 fps)
PROTOCOL_TIME_UNIT = 0.4


@dataclass(frozen=True)
class ForecastSequences:
    """N pedestrians of S sequences: history (N, observe, 2), future (N, horizon, 2), groups (N,) long (the
    sequence of each pedestrian), ped_ids (N,) long; per sequence its window's name and first frame."""

    history: torch.Tensor
    future: torch.Tensor
    groups: torch.Tensor
    ped_ids: torch.Tensor
    windows: tuple[str, ...]
    starts: tuple[int, ...]

    @property
    def num_sequences(self) -> int:
        """The number of sequences S."""
        return len(self.starts)


def resample(window: Window, time_unit: float = PROTOCOL_TIME_UNIT) -> Window:
    """`window` at `time_unit` seconds per frame, keeping every n-th frame (n = time_unit / window.time_unit, a whole
    number within 1e-6); the window itself when it is already at that rate."""
    ratio = time_unit / window.time_unit
    step = round(ratio)
    if step < 1 or not math.isclose(ratio, step, rel_tol=1e-6):
        raise ValueError(f"time_unit: {time_unit} s is not a whole multiple of window {window.name}'s "
                         f"{window.time_unit} s per frame")  # fmt: skip
    return window if step == 1 else window.subset(slice(None, None, step))


def forecast_sequences(
    windows: Window | Sequence[Window],
    *,
    observe: int = 8,
    horizon: int = 12,
    skip: int = 1,
    min_pedestrians: int = 2,
) -> ForecastSequences:
    """The protocol's sequences of `windows` (see the module docstring), all at one frame rate."""
    windows = [windows] if isinstance(windows, Window) else list(windows)
    for name, value, least in (("observe", observe, 2), ("horizon", horizon, 1), ("skip", skip, 1),
                               ("min_pedestrians", min_pedestrians, 1)):  # fmt: skip
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"{name}: expected an integer >= {least}, got {value!r}")
    if not windows or len({w.time_unit for w in windows}) != 1:
        raise ValueError(f"windows: expected one or more windows at one frame rate, got time units "
                         f"{sorted({w.time_unit for w in windows})}")  # fmt: skip
    length = observe + horizon
    parts, names, starts = [], [], []
    for w in windows:
        if w.num_frames < length:
            continue
        starts_w = torch.arange(0, w.num_frames - length + 1, skip)
        frames = starts_w[:, None] + torch.arange(length)[None]  # (S, L)
        full = w.mask[frames].all(1)  # (S, P): present at every frame of the sequence
        counted = full.sum(1) >= min_pedestrians
        seq, ped = full[counted].nonzero(as_tuple=True)
        parts.append((w.positions[frames[counted][seq], ped[:, None]], w.ped_ids[ped], seq + len(starts)))
        names += [w.name] * int(counted.sum())
        starts += starts_w[counted].tolist()
    if not starts:
        raise ValueError(f"windows: no sequence of {length} frames with {min_pedestrians} or more pedestrians present "
                         "throughout")  # fmt: skip
    tracks, ids, groups = (torch.cat(x) for x in zip(*parts, strict=True))
    return ForecastSequences(tracks[:, :observe], tracks[:, observe:], groups, ids, tuple(names), tuple(starts))


def evaluate_forecast(
    scene,
    sequences: ForecastSequences,
    policy: Policy,
    *,
    k: int = 20,
    generator: torch.Generator | None = None,
    device: torch.device | str = "cpu",
) -> dict[str, float]:
    """{"min_ade", "min_fde"} (m) over k joint samples of every sequence (one batched call), with the number of
    "pedestrians" and "sequences" scored. Destinations are unknown: the policy's goal model (`forecast_goals`)."""
    return score_forecast(sample_forecast(scene, sequences, policy, k=k, generator=generator, device=device),
                          sequences)  # fmt: skip


def sample_forecast(
    scene,
    sequences: ForecastSequences,
    policy: Policy,
    *,
    k: int = 20,
    generator: torch.Generator | None = None,
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """k joint samples of the futures of every sequence in one batched call: (k, N, horizon, 2) on the CPU."""
    return predict(
        scene,
        sequences.history,
        k,
        model=policy,
        groups=sequences.groups,
        horizon=sequences.future.shape[1],
        generator=generator,
        device=device,
    ).cpu()


def score_forecast(pred: torch.Tensor, sequences: ForecastSequences) -> dict[str, float]:
    """minADE / minFDE of samples pred (k, N, horizon, 2) against the sequences' futures, and what was scored."""
    true = sequences.future
    return {
        "min_ade": min_ade(pred, true),
        "min_fde": min_fde(pred, true),
        "pedestrians": float(true.shape[0]),
        "sequences": float(sequences.num_sequences),
    }


def forecast_to_blob(sequences: ForecastSequences, pred: torch.Tensor, time_unit: float) -> dict:
    """What a forecast file holds (tensors, strings and numbers only, for `torch.load(weights_only=True)`)."""
    return {"format": FORECAST_FORMAT, "pred": pred.cpu(), "time_unit": float(time_unit),
            **{f.name: getattr(sequences, f.name) for f in fields(sequences)}}  # fmt: skip


def forecast_problem(blob: object) -> str | None:
    """What keeps `blob` from being a forecast file's content (None: nothing)."""
    names = {f.name for f in fields(ForecastSequences)}
    if not isinstance(blob, dict) or blob.get("format") != FORECAST_FORMAT or not {"pred", *names} <= set(blob):
        return f"expected format {FORECAST_FORMAT!r} with pred and {', '.join(sorted(names))}"
    pred, future, history = blob["pred"], blob["future"], blob["history"]
    tensors = all(isinstance(blob[n], torch.Tensor) for n in ("pred", "future", "history", "groups", "ped_ids"))
    if not tensors or pred.dim() != 4 or pred.shape[1:] != future.shape or history.shape[0] != future.shape[0]:
        return "pred (k, N, horizon, 2), future (N, horizon, 2) and history (N, observe, 2) do not fit together"
    if not (bool(torch.isfinite(pred).all()) and bool(torch.isfinite(future).all())):
        return "pred or future holds NaN or inf"
    return None


def sequences_of(blob: dict) -> ForecastSequences:
    """The `ForecastSequences` of a forecast file's content (checked by `forecast_problem`)."""
    return ForecastSequences(**{f.name: blob[f.name] for f in fields(ForecastSequences)})
