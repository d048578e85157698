"""FlowLab's pytest plugin: a no-network guard, a `device` fixture over every available device, `gpu` skips, a
console wide enough that rich never wraps a CLI's one-line error, and the run on every core through pytest-xdist
(where installed), each worker on its share of the threads.

Enabled for the whole workspace with `-p flowlab.core.testing.plugin`; any test that opens a connection to a
non-loopback address fails with a message naming the address.
"""

from __future__ import annotations

import ipaddress
import os
import socket

import pytest
import torch

from flowlab.core.testing.devices import available_devices

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex
_real_getaddrinfo = socket.getaddrinfo


class NetworkAccessError(RuntimeError):
    """Raised when a test tries to reach a non-loopback address."""


def _is_local(address: object) -> bool:
    if isinstance(address, str):  # AF_UNIX path
        return True
    if isinstance(address, tuple) and address:
        host = address[0]
        if host in ("localhost", ""):
            return True
        try:
            ip = ipaddress.ip_address(host.split("%")[0])
        except ValueError:
            return False
        return ip.is_loopback or ip.is_unspecified
    return False


def _guarded_connect(self: socket.socket, address: object) -> None:
    if not _is_local(address):
        raise NetworkAccessError(f"test tried to open a network connection to {address!r}; tests must stay offline")
    return _real_connect(self, address)


def _guarded_connect_ex(self: socket.socket, address: object) -> int:
    if not _is_local(address):
        raise NetworkAccessError(f"test tried to open a network connection to {address!r}; tests must stay offline")
    return _real_connect_ex(self, address)


def _guarded_getaddrinfo(host, *args, **kwargs):
    if host not in (None, "localhost", "") and not _is_local((host,)):
        raise NetworkAccessError(f"test tried to resolve {host!r}; tests must stay offline")
    return _real_getaddrinfo(host, *args, **kwargs)


def install_network_guard() -> None:
    """Patch socket's connect, connect_ex and getaddrinfo so that reaching a non-loopback address raises
    `NetworkAccessError`."""
    socket.socket.connect = _guarded_connect
    socket.socket.connect_ex = _guarded_connect_ex
    socket.getaddrinfo = _guarded_getaddrinfo


def remove_network_guard() -> None:
    """Restore the real socket functions that `install_network_guard` replaced."""
    socket.socket.connect = _real_connect
    socket.socket.connect_ex = _real_connect_ex
    socket.getaddrinfo = _real_getaddrinfo


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """pytest's `pytest_runtest_call` hook, as a wrapper: the network guard is on while each test body runs."""
    install_network_guard()
    try:
        yield
    finally:
        remove_network_guard()


#: pytest-xdist's options for a run that names no `-n`: one worker per core, at most 4, by work stealing
XDIST_ARGS = ("-n", "auto", "--maxprocesses", "4", "--dist", "worksteal")


def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """pytest's `pytest_load_initial_conftests` hook: where pytest-xdist is installed (the workspace's test group)
    and the command line names no `-n`, the run goes on `XDIST_ARGS` (`-n 0` runs serially). Without xdist (a bare
    GPU machine's pytest, or `-p no:xdist`) and inside xdist's workers, the arguments stay as given.

    The workers and every process a test starts inherit OMP_WAIT_POLICY=PASSIVE (unless it is set): their OpenMP
    threads sleep at a barrier instead of spinning, so a two-thread step beside another worker's test is not
    several times slower (the digits feature net's two-thread build: 29 s instead of 87-162 s beside a busy
    process on 2 cores)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if not early_config.pluginmanager.hasplugin("xdist"):
        return
    if any(arg.startswith(("-n", "--numprocesses")) for arg in args):
        return
    args[:] = [*XDIST_ARGS, *args]


def pytest_configure(config: pytest.Config) -> None:
    """pytest's `pytest_configure` hook: sets TERMINAL_WIDTH so the CLIs under test get a console too wide to wrap."""
    # typer's rich boxes a CLI error at the console width (80 off a terminal): a word of it could break across lines
    # wherever the length of a temporary path puts it, so the CLIs under test get a console too wide to wrap (typer
    # reads TERMINAL_WIDTH when first imported, after this hook; pytest's own output keeps its width)
    os.environ["TERMINAL_WIDTH"] = "2000"
    share_cores_among_workers()


def share_cores_among_workers() -> None:
    """Under pytest-xdist, each worker (and every subprocess it starts) gets its share of the cores as torch's
    intra-op threads, so N workers never run N x cores threads on the machine."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        threads = max(1, cores // workers)
        torch.set_num_threads(threads)
        os.environ["OMP_NUM_THREADS"] = str(threads)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """pytest's `pytest_collection_modifyitems` hook: without a CUDA device, every test marked `gpu` is skipped."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(params=available_devices(), ids=lambda d: d.type)
def device(request: pytest.FixtureRequest) -> torch.device:
    """Run the test once per available device (CPU always; CUDA when present)."""
    return request.param


@pytest.fixture
def one_thread():
    """torch on one intra-op thread for the test (restored after): tiny networks on a shared 2-core machine avoid
    oversubscription, and float reductions do not depend on how work splits over threads."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
