"""`flowlab vision dsa check|bench`: DSA's exactness on a real process group (gloo processes on this machine, or
NCCL under torchrun on GPUs), and its communication table with closed forms and the modelled speed-up."""

from __future__ import annotations

import math
from typing import Annotated

import typer

from flowlab.core.cli import SEEDS, choice_option, json_text, option_error
from flowlab.vision_gen.dsa.names import ALL_TO_ALL, BACKENDS, SCHEDULES

app = typer.Typer(help="DSA: distributed sparse attention for video DiTs.", no_args_is_help=True)

WorldSize = Annotated[int, typer.Option(help="Ranks: 1, 2, 4 or 8.")]
Frames = Annotated[int, typer.Option(help="Frames (a multiple of the world size).")]
Grid = Annotated[int, typer.Option(help="Patch rows and columns per frame.")]
Heads = Annotated[int, typer.Option(help="Attention heads.")]
HeadDim = Annotated[int, typer.Option(help="Channels per head.")]
Window = Annotated[int, typer.Option(help="Spatial heads' frame window (at most the frames per rank).")]
Sinks = Annotated[int, typer.Option(help="Attention-sink tokens at the start of the sequence.")]


def _check_config(**fields):
    """A `CheckConfig` from the options, its errors reported against them."""
    from flowlab.vision_gen.dsa.evaluate import CheckConfig
    from flowlab.vision_gen.dsa.masks import SparsePattern

    pattern = {name: fields.pop(name) for name in ("window", "sinks", "temporal_radius")}
    try:
        return CheckConfig(pattern=SparsePattern(**pattern), **fields)
    except ValueError as err:
        raise option_error(err) from err


@app.command()
def check(
    world_size: WorldSize = 4,
    backend: Annotated[str, typer.Option(help="gloo (local CPU processes) or nccl (torchrun on GPUs).")] = "gloo",
    frames: Frames = 8,
    grid: Grid = 4,
    heads: Heads = 6,
    head_dim: HeadDim = 8,
    window: Window = 1,
    temporal_radius: Annotated[int, typer.Option(help="Temporal heads' patch radius.")] = 0,
    sinks: Sinks = 4,
    schedule: Annotated[str, typer.Option(help="naive or dynamic.")] = "dynamic",
    all_to_all: Annotated[str, typer.Option(help="native (the backend's) or p2p (send/recv fallback).")] = "native",
    seed: Annotated[int, typer.Option(**SEEDS, help="Seed of the planted q, k, v.")] = 0,
) -> None:
    """DSA against single-device sparse attention and ring / Ulysses / USP against dense attention (float64), the
    bytes and messages of one layer beside their closed forms, and the planted-head vote, as one JSON line; exits 1
    when an error passes 1e-10 or a count misses its closed form."""
    choice_option(backend, BACKENDS, "--backend")
    choice_option(schedule, SCHEDULES, "--schedule")
    choice_option(all_to_all, ALL_TO_ALL, "--all-to-all")
    cfg = _check_config(world_size=world_size, frames=frames, grid=grid, heads=heads, head_dim=head_dim,
                        window=window, temporal_radius=temporal_radius, sinks=sinks, schedule=schedule,
                        all_to_all=all_to_all, seed=seed % 2**63)  # fmt: skip
    if backend == "nccl":
        import torch

        if torch.cuda.device_count() < world_size:
            raise typer.BadParameter(f"nccl needs {world_size} GPUs, found {torch.cuda.device_count()}",
                                     param_hint="--backend")  # fmt: skip
        result = _torchrun_check(cfg)
    else:
        from flowlab.vision_gen.dsa.evaluate import run_check

        result = run_check(cfg)
    exact = max(result["errors"].values()) <= 1e-10
    closed = all(c["bytes"] == c["closed_bytes"] and c["messages"] == c["closed_messages"]
                 for c in result["counts"].values())  # fmt: skip
    typer.echo(json_text({"exact": exact, "counts_match_closed_form": closed, **result}))
    if not (exact and closed):
        raise typer.Exit(1)


def _torchrun_check(cfg) -> dict:
    """`evaluate.main` under torchrun with NCCL on `cfg.world_size` GPUs; rank 0's JSON line."""
    import json
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={cfg.world_size}", "-m",
                          "flowlab.vision_gen.dsa.evaluate", "--config", json.dumps(cfg.to_dict())],
                         check=True, capture_output=True, text=True)  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


@app.command()
def bench(
    world_size: WorldSize = 4,
    frames: Frames = 8,
    grid: Grid = 8,
    heads: Heads = 8,
    head_dim: HeadDim = 16,
    window: Window = 1,
    sinks: Sinks = 4,
    bandwidth: Annotated[float, typer.Option(help="Link bandwidth of the cost model, MB/s.")] = 1000.0,
    latency: Annotated[float, typer.Option(help="Latency per message of the cost model, microseconds.")] = 10.0,
) -> None:
    """Per method (DSA with spatial, temporal and mixed heads; ring, Ulysses, USP 2x2 when it fits) the bytes and
    messages of one layer counted on gloo processes beside their closed forms, then the cost model's milliseconds
    per layer (float32, half the heads spatial, this CPU's measured attention time at the given bandwidth and
    latency), one JSON line per row."""
    for value, name in ((bandwidth, "--bandwidth"), (latency, "--latency")):
        if not (math.isfinite(value) and value > 0):
            raise typer.BadParameter(f"expected a positive finite number, got {value}", param_hint=name)
    cfg = _check_config(world_size=world_size, frames=frames, grid=grid, heads=heads, head_dim=head_dim,
                        window=window, temporal_radius=0, sinks=sinks)  # fmt: skip
    from dataclasses import replace

    import torch

    from flowlab.vision_gen.dsa.costs import model_layer, time_dense_attention
    from flowlab.vision_gen.dsa.evaluate import run_check

    result = run_check(cfg)
    shape = replace(cfg.shape(heads // 2), elem_bytes=4)  # as the check's mixed case: every other head spatial
    dense = time_dense_attention(shape, generator=torch.Generator().manual_seed(0))
    times = model_layer(shape, cfg.layout, cfg.pattern, dense_seconds=dense, bandwidth_mb_s=bandwidth,
                        latency_us=latency)  # fmt: skip
    for method, counts in result["counts"].items():
        row = {"method": method, **counts, "max_err": result["errors"].get(method.replace("/", "_"))}
        typer.echo(json_text(row))
    for method, seconds in times.items():
        typer.echo(json_text({"method": method, "modelled_ms": 1e3 * seconds, "bandwidth_mb_s": bandwidth}))
