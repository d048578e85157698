"""`spawn_gloo`: local Gloo groups for tests and benchmarks; results in rank order, a failing rank named, a timeout."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from flowlab.core.train import RankError, dist_info, spawn_gloo


def _all_reduce(rank: int, base: float) -> dict:
    x = torch.tensor([base + rank, 1.0])
    dist.all_reduce(x)
    info = dist_info()
    return {"sum": x, "rank": info.rank, "world": info.world_size, "threads": torch.get_num_threads()}


def _rank_one_fails(rank: int) -> None:
    if rank == 1:
        raise ArithmeticError("rank one's planted failure")
    dist.all_reduce(torch.ones(1))  # waits for rank 1, which never comes


def _sleeps(rank: int) -> None:
    time.sleep(30)


def _counts_runs(rank: int, folder: str) -> None:
    if rank == 1:
        with open(Path(folder) / "ran", "a") as f:
            f.write("x")
        raise ArithmeticError("fn's own failure")


def _fail_joining(monkeypatch, folder: Path, times: int) -> None:
    """Rank 1's first `times` init_process_group calls (counted in files, across forked ranks) raise Gloo's error."""
    real = dist.init_process_group

    def flaky(*args, rank, **kwargs):
        tries = len(list(folder.glob("join*")))
        if rank == 1 and tries < times:
            (folder / f"join{tries}").touch()
            raise RuntimeError("[enforce fail at gloo/transport/tcp/pair.cc] Connection closed by peer")
        return real(*args, rank=rank, **kwargs)

    monkeypatch.setattr(dist, "init_process_group", flaky)  # the forked ranks inherit the patch


def test_two_ranks_all_reduce_to_the_sum():
    results = spawn_gloo(_all_reduce, 2, 10.0)
    assert [(r["rank"], r["world"], r["threads"]) for r in results] == [(0, 2, 1), (1, 2, 1)]
    for r in results:
        assert torch.equal(r["sum"], torch.tensor([21.0, 2.0]))
    assert not dist.is_initialized()  # the parent never joined a group


def test_a_failing_rank_is_named_with_its_traceback():
    with pytest.raises(RankError, match="rank 1 of 2 failed") as info:
        spawn_gloo(_rank_one_fails, 2, timeout=30)
    assert info.value.rank == 1 and info.value.world_size == 2
    assert "ArithmeticError: rank one's planted failure" in str(info.value)
    assert "_rank_one_fails" in str(info.value)


def test_ranks_past_the_timeout_are_killed():
    start = time.monotonic()
    with pytest.raises(TimeoutError, match=r"ranks \[0, 1\] of 2 still running after 1 s"):
        spawn_gloo(_sleeps, 2, timeout=1)
    assert time.monotonic() - start < 10


def test_bad_arguments_are_refused():
    for world, kwargs, name in (
        (0, {}, "world_size"),
        (2, {"timeout": 0}, "timeout"),
        (2, {"threads": 0}, "threads"),
        (2, {"start_method": "teleport"}, "start_method"),
    ):
        with pytest.raises(ValueError, match=name):
            spawn_gloo(_sleeps, world, **kwargs)
    with pytest.raises(ValueError, match="fn"):
        spawn_gloo("not a function", 2)


def test_a_group_that_fails_to_form_once_is_formed_again(monkeypatch, tmp_path):
    _fail_joining(monkeypatch, tmp_path, times=1)
    with pytest.warns(UserWarning, match="failed to form on rank 1, trying once more"):
        results = spawn_gloo(_all_reduce, 2, 10.0, timeout=30)
    assert [torch.equal(r["sum"], torch.tensor([21.0, 2.0])) for r in results] == [True, True]
    assert len(list(tmp_path.glob("join*"))) == 1


def test_a_second_failure_to_form_and_a_failure_in_fn_are_not_retried(monkeypatch, tmp_path):
    _fail_joining(monkeypatch, tmp_path, times=2)
    with pytest.warns(UserWarning), pytest.raises(RankError, match="rank 1 of 2 failed") as info:
        spawn_gloo(_all_reduce, 2, 10.0, timeout=30)
    assert "Connection closed by peer" in str(info.value)
    monkeypatch.undo()
    with pytest.raises(RankError, match="fn's own failure"):
        spawn_gloo(_counts_runs, 2, str(tmp_path), timeout=30)
    assert (tmp_path / "ran").read_text() == "x"  # fn ran once
