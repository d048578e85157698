"""`spawn_gloo`: local Gloo groups for tests and benchmarks; results in rank order, a failing rank named, a timeout."""

from __future__ import annotations

import time

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
