"""Worker processes that do not outlive the process that started them.

`spawn_pool` is the one way the bench protocol (`parallel_map`, `parallel_jobs`, `worker_pool`) and the runner's
`--jobs` start processes. It imports no torch, so a worker pays for torch only if its jobs need it.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor

__all__ = ["spawn_pool"]


def _exit_with(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)  # the parent is gone: no result can be delivered, so stop computing


def _start_worker(parent: int, initializer: Callable[..., None] | None, initargs: tuple) -> None:
    threading.Thread(target=_exit_with, args=(parent,), daemon=True, name="exit-with-parent").start()
    if initializer is not None:
        initializer(*initargs)


def spawn_pool(
    workers: int, *, initializer: Callable[..., None] | None = None, initargs: tuple = ()
) -> ProcessPoolExecutor:
    """A `ProcessPoolExecutor` of `workers` spawned processes that exit within a second of this process's end.
    A runner killed by a signal that skips its cleanup (SIGTERM, SIGKILL) would otherwise leave its workers computing
    cases nobody will read, beside the next run. `initializer(*initargs)` runs in each worker as in the executor."""
    args = (os.getpid(), initializer, tuple(initargs))
    return ProcessPoolExecutor(
        workers, mp_context=multiprocessing.get_context("spawn"), initializer=_start_worker, initargs=args
    )
