"""Local Gloo process groups for tests and benchmarks: `spawn_gloo` runs a function on N CPU processes of this
machine, joined in one `torch.distributed` group over the loopback, and returns what each rank returned.

Training on several devices goes through `torchrun` instead (see `flowlab.core.train.distributed`).
"""

from __future__ import annotations

import os
import pickle
import socket
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

__all__ = ["RankError", "spawn_gloo"]


class RankError(RuntimeError):
    """A rank of `spawn_gloo` failed: `rank` of `world_size`, and its traceback (or exit status) in the message."""

    def __init__(self, rank: int, world_size: int, detail: str) -> None:
        super().__init__(f"rank {rank} of {world_size} failed:\n{detail}")
        self.rank, self.world_size = rank, world_size


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _record_failure(out_dir: str, rank: int, phase: str) -> None:
    # when it was raised (before the group is torn down), so the parent names the rank that failed first, not a
    # peer whose collective it broke; `phase` ("join" or "run") says whether `fn` had started
    (Path(out_dir) / f"rank{rank}.err").write_text(f"{time.time()!r} {phase}\n{traceback.format_exc()}")


def _run_rank(
    rank: int, fn: Callable[..., Any], world_size: int, port: int, threads: int, out_dir: str, args: tuple
) -> None:
    try:
        torch.set_num_threads(threads)  # also rebuilds the thread pool, which does not survive a fork
        env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank), "LOCAL_RANK": str(rank)}
        env.update(WORLD_SIZE=str(world_size), OMP_NUM_THREADS=str(threads))
        if any(name == "lo" for _, name in socket.if_nameindex()):
            env["GLOO_SOCKET_IFNAME"] = "lo"
        os.environ.update(env)
        # the group meets in a file of this call's own folder, not on a port: concurrent calls (pytest-xdist workers,
        # parallel benchmarks) cannot join each other's group through a port picked twice
        store = f"file://{Path(out_dir) / 'store'}"
        dist.init_process_group("gloo", init_method=store, rank=rank, world_size=world_size)
    except BaseException:
        _record_failure(out_dir, rank, "join")
        raise
    try:
        result = fn(rank, *args)
        with open(Path(out_dir) / f"rank{rank}.pkl", "wb") as f:
            pickle.dump(result, f)
    except BaseException:
        _record_failure(out_dir, rank, "run")
        raise
    finally:
        dist.destroy_process_group()


class _Failure(NamedTuple):
    """The rank whose error came first, its traceback (the exit status when no rank recorded one) and the phase it
    failed in ("join": while forming the group, "run": in `fn`, "exit": unrecorded)."""

    rank: int
    detail: str
    phase: str


def _first_failure(out_dir: str, error: Exception) -> _Failure:
    """The `_Failure` of a try, from the error files its ranks wrote into `out_dir` (else from `error`)."""
    failures = []
    for path in Path(out_dir).glob("rank*.err"):
        head, detail = path.read_text().split("\n", 1)
        when, phase = head.split(" ")
        failures.append((float(when), int(path.stem[4:]), phase, detail.strip()))
    if not failures:
        return _Failure(getattr(error, "error_index", -1), str(error), "exit")
    _, rank, phase, detail = min(failures)
    others = sorted(f[1] for f in failures if f[1] != rank)
    return _Failure(rank, detail + (f"\n(then ranks {others} failed too)" if others else ""), phase)


def _attempt(
    fn: Callable[..., Any], world_size: int, args: tuple, timeout: float, threads: int, start_method: str
) -> list[Any] | _Failure:
    """One try of `spawn_gloo`: the results in rank order, or the first failure."""
    with tempfile.TemporaryDirectory(prefix="flowlab-gloo-") as out_dir:
        context = mp.start_processes(
            _run_rank,
            args=(fn, world_size, _free_port(), threads, out_dir, args),
            nprocs=world_size,
            join=False,
            start_method=start_method,
        )
        deadline = time.monotonic() + timeout
        try:
            while not context.join(timeout=max(0.0, min(1.0, deadline - time.monotonic()))):
                if time.monotonic() >= deadline:
                    running = [r for r, p in enumerate(context.processes) if p.is_alive()]
                    for p in context.processes:
                        p.kill()
                        p.join()
                    raise TimeoutError(f"spawn_gloo: ranks {running} of {world_size} still running after {timeout:g} s")
        except (mp.ProcessRaisedException, mp.ProcessExitedException) as e:
            return _first_failure(out_dir, e)
        results = []
        for rank in range(world_size):
            with open(Path(out_dir) / f"rank{rank}.pkl", "rb") as f:
                results.append(pickle.load(f))
        return results


def spawn_gloo(
    fn: Callable[..., Any],
    world_size: int,
    *args: Any,
    timeout: float = 60.0,
    threads: int = 1,
    start_method: str = "fork",
) -> list[Any]:
    """Run `fn(rank, *args)` on `world_size` local processes in one Gloo group; returns their results in rank order.

    Each process sets `threads` torch threads, joins the group through a file store in a private temporary folder
    (`MASTER_ADDR`, a free loopback `MASTER_PORT`, `RANK`, `LOCAL_RANK`, `WORLD_SIZE` are set too, so
    `init_distributed()` inside finds the group) and leaves it when `fn` returns. Results must pickle. A rank that
    raises (or dies) stops every rank and raises `RankError` naming it with its traceback; ranks still running after
    `timeout` seconds are killed and a `TimeoutError` names them. A group that fails to form (a rank's
    `init_process_group` raises, as Gloo's full-mesh connect can under load) is formed once more in a fresh store,
    with a warning, so `fn` may have started on some ranks of the failed try; a failure inside `fn` is never
    retried, nor a second failure to form. "fork" (the default) runs functions of any module, test modules included,
    and must not be used once CUDA is initialised; "spawn" needs an importable `fn`.
    """
    if not callable(fn):
        raise ValueError(f"fn: expected a callable fn(rank, *args), got {fn!r}")
    if not (isinstance(world_size, int) and not isinstance(world_size, bool) and world_size >= 1):
        raise ValueError(f"world_size: expected an integer >= 1, got {world_size!r}")
    if not (isinstance(timeout, (int, float)) and timeout > 0):
        raise ValueError(f"timeout: expected a positive number of seconds, got {timeout!r}")
    if not (isinstance(threads, int) and threads >= 1):
        raise ValueError(f"threads: expected an integer >= 1, got {threads!r}")
    if start_method not in mp.get_all_start_methods():
        raise ValueError(f"start_method: expected one of {mp.get_all_start_methods()}, got {start_method!r}")
    out = _attempt(fn, world_size, args, timeout, threads, start_method)
    if isinstance(out, _Failure) and out.phase == "join":
        # Gloo's full-mesh connect can lose a loopback connection under load: the group is formed once more
        msg = f"spawn_gloo: the group failed to form on rank {out.rank}, trying once more:\n{out.detail}"
        warnings.warn(msg, stacklevel=2)
        out = _attempt(fn, world_size, args, timeout, threads, start_method)
    if isinstance(out, _Failure):
        raise RankError(out.rank, world_size, out.detail)
    return out
