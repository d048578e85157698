"""DSA on real gloo process groups (`spawn_gloo`, 2 and 4 ranks, float64): equal to single-device masked sparse
attention for spatial, temporal and mixed heads (both all-to-all paths, both schedules, with and without sinks,
uneven head splits), ring / Ulysses / USP equal to dense attention, counted bytes and messages equal to their closed
forms, the partial ring's per-rank messages, the planted-head vote, and every bad input named."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist

from flowlab.core.nets import TokenLayout
from flowlab.core.train import spawn_gloo
from flowlab.vision_gen.dsa.comm import Communicator, CountingCommunicator
from flowlab.vision_gen.dsa.costs import LayerShape, comm_closed_form
from flowlab.vision_gen.dsa.dsa import DistributedSparseAttention, check_shardable
from flowlab.vision_gen.dsa.evaluate import CheckConfig, run_check
from flowlab.vision_gen.dsa.masks import SparsePattern
from flowlab.vision_gen.dsa.profiling import classify_heads_local, majority_vote, planted_qkv
from flowlab.vision_gen.dsa.scaling import time_layer

pytestmark = pytest.mark.usefixtures("one_thread")

TINY = dict(frames=8, grid=2, heads=6, head_dim=4)  # 32 tokens; 6 heads split 2, 2, 1, 1 over 4 ranks


def _assert_exact(result: dict, *, vote: bool = True) -> None:
    assert result["agree"], "ranks returned different results"
    assert max(result["errors"].values()) <= 1e-10, result["errors"]
    for name, c in result["counts"].items():
        assert (c["bytes"], c["messages"]) == (c["closed_bytes"], c["closed_messages"]), name
    assert not vote or result["voted"] == result["planted"]


@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize("mode", ["native", "p2p"])
def test_dsa_exact_and_counted(world, mode):
    result = run_check(CheckConfig(world_size=world, all_to_all=mode, **TINY), timeout=60)
    _assert_exact(result)
    assert {"dsa_spatial", "dsa_temporal", "dsa_mixed", "dsa_temporal_dominant", "ring", "ulysses"} <= set(
        result["errors"]
    )
    assert ("usp" in result["errors"]) == (world == 4)


def test_naive_schedule_window_zero_without_sinks():
    cfg = CheckConfig(world_size=4, schedule="naive", pattern=SparsePattern(window=0, sinks=0, temporal_radius=1),
                      **(TINY | {"grid": 4}))  # fmt: skip
    _assert_exact(run_check(cfg, timeout=60))


@pytest.mark.parametrize("window", [1, 2])
def test_sinks_inside_the_boundary_tokens_are_not_sent_twice(window):
    # 8 tokens a rank, 6 sinks: with window 1 rank 1 receives rank 0's last 4 tokens (sinks 4 and 5 among them) and
    # the first 4 as its sink block; with window 2 the whole shard, so no sink block
    cfg = CheckConfig(world_size=4, pattern=SparsePattern(window=window, sinks=6), **TINY)
    _assert_exact(run_check(cfg, timeout=60))


@pytest.mark.slow
def test_eight_ranks_with_spatial_radius():
    cfg = CheckConfig(world_size=8, frames=16, grid=4, heads=8, head_dim=4, all_to_all="p2p",
                      pattern=SparsePattern(window=2, spatial_radius=1, sinks=3))  # fmt: skip
    _assert_exact(run_check(cfg, timeout=120), vote=False)  # planted heads fill whole frames, the radius does not


def _one_rank(rank: int) -> dict:
    cfg = CheckConfig(world_size=1, **TINY)
    from flowlab.vision_gen.dsa.evaluate import check_rank

    return check_rank(rank, cfg)


def test_one_rank_is_sparse_attention_without_communication():
    result = spawn_gloo(_one_rank, 1, timeout=60)[0]
    assert max(result["errors"].values()) <= 1e-10
    assert all(c["bytes"] == 0 and c["messages"] == 0 for c in result["counts"].values())


def _ring_per_rank(rank: int, sinks: int) -> tuple[int, int]:
    layout = TokenLayout(8, 2, 2)
    comm = CountingCommunicator()
    attn = DistributedSparseAttention(layout, SparsePattern(window=1, sinks=sinks), comm)
    q = torch.randn(1, 3, 8, 4, dtype=torch.float64)
    attn(q, q, q, torch.zeros(3, dtype=torch.long))
    return comm.totals()["bytes"], comm.totals()["messages"]


def test_partial_ring_sends_two_messages_per_rank_one_at_the_ends():
    # k and v of 3 spatial heads, D = 4, float64, of the 4 tokens of the one boundary frame the window reaches (of
    # the 8 tokens a rank holds)
    per_message = 2 * 3 * 4 * 4 * 8
    assert spawn_gloo(_ring_per_rank, 4, 0, timeout=60) == [(per_message, 1), (2 * per_message, 2),
                                                           (2 * per_message, 2), (per_message, 1)]  # fmt: skip
    # the 2 sink tokens' k and v from rank 0: to rank 1 in front of its boundary frame, to ranks 2 and 3 alone
    sink = 2 * 3 * 2 * 4 * 8
    got = spawn_gloo(_ring_per_rank, 4, 2, timeout=60)
    assert got[0] == (per_message + 3 * sink, 3) and got[1:] == [(2 * per_message, 2), (2 * per_message, 2),
                                                                 (per_message, 1)]  # fmt: skip


def _all_to_all(rank: int) -> list[list[torch.Tensor]]:
    outs = []
    for mode in ("native", "p2p"):
        comm = Communicator(all_to_all=mode)
        equal = [torch.full((2, 3), 10.0 * rank + j) for j in range(2)]
        uneven = [torch.full((1 + j,), 10.0 * rank + j) for j in range(2)]
        outs.append(comm.all_to_all(equal, [(2, 3)] * 2).wait())
        outs.append(comm.all_to_all(uneven, [(1 + rank,)] * 2).wait())
    return outs


def test_all_to_all_native_and_send_recv_fallback_agree():
    for rank, (native, native_uneven, p2p, p2p_uneven) in enumerate(spawn_gloo(_all_to_all, 2, timeout=60)):
        for j in range(2):
            assert torch.equal(native[j], torch.full((2, 3), 10.0 * j + rank)) and torch.equal(native[j], p2p[j])
            assert torch.equal(native_uneven[j], torch.full((1 + rank,), 10.0 * j + rank))
            assert torch.equal(p2p_uneven[j], native_uneven[j])


def test_closed_forms_by_hand():
    s = LayerShape(batch=1, heads=4, spatial_heads=2, tokens=64, head_dim=8, sinks=4, elem_bytes=4, world_size=4,
                   reach=4)  # fmt: skip
    local = 16 * 8 * 4  # one head's tokens on one rank, bytes
    assert comm_closed_form("ring", s) == {"bytes": 4 * 3 * 2 * 4 * local, "messages": 12}
    assert comm_closed_form("ulysses", s) == {"bytes": 4 * 3 * 4 * local, "messages": 24}  # 4 (N-1) H n D e
    # Ulysses in 2 groups of 2 ranks: 4 (u - 1) H n D e each; ring in 2 groups of 2 ranks: each rank sends k and v
    # of H / u = 2 heads over u n = 32 tokens once
    usp = 2 * (4 * 1 * 4 * local) + 2 * 2 * (2 * 2 * 2 * local)
    assert comm_closed_form("usp", s) == {"bytes": usp, "messages": 2 * 4 + 2 * 2}
    # k and v of the 2 spatial heads: the 4 boundary tokens both ways between the 3 neighbour pairs (6 messages),
    # and rank 0's 4 sinks to ranks 1, 2 and 3 (rank 1 receives only rank 0's last 4 tokens as its neighbour: its
    # sinks travel in front of them, in the same message)
    token = 2 * 2 * 8 * 4
    dsa_ring = 6 * 4 * token + 3 * 4 * token
    # the 2 temporal heads split 1, 1, 0, 0: ranks 2 and 3 send their q, k, v to ranks 0 and 1 (2 + 2), ranks 0 and 1
    # to each other (1 + 1), and only ranks 0 and 1 send outputs back (3 + 3)
    assert comm_closed_form("dsa", s) == {"bytes": dsa_ring + 4 * 3 * 2 * local, "messages": 6 + 2 + 12}
    # a window over the whole neighbouring shard: rank 1 holds the sinks already; no window: sinks only
    whole, none = dataclasses.replace(s, reach=16), dataclasses.replace(s, reach=0)
    assert comm_closed_form("dsa", whole)["bytes"] == 6 * 16 * token + 2 * 4 * token + 4 * 3 * 2 * local
    assert comm_closed_form("dsa", none) == {"bytes": 3 * 4 * token + 4 * 3 * 2 * local, "messages": 3 + 12}
    with pytest.raises(ValueError, match=r"^method: expected"):
        comm_closed_form("tree", s)


@pytest.mark.parametrize("seed", range(3))
def test_planted_heads_recovered_by_local_vote(seed):
    layout, world = TokenLayout(8, 4, 4), 4
    g = torch.Generator().manual_seed(seed)
    planted = torch.randint(2, (8,), generator=g)
    q, k, v = planted_qkv(layout, planted, head_dim=8, generator=g)
    n, shard = layout.num_tokens // world, TokenLayout(2, 4, 4)
    votes = torch.stack([classify_heads_local(q[:, :, r * n : (r + 1) * n], k[:, :, r * n : (r + 1) * n],
                                              v[:, :, r * n : (r + 1) * n], shard, SparsePattern(sinks=0),
                                              num_queries=16, generator=g) for r in range(world)])  # fmt: skip
    assert torch.equal(majority_vote(votes), planted)


def test_majority_vote_ties_go_spatial():
    assert majority_vote(torch.tensor([[1, 0, 1], [0, 0, 1]])).tolist() == [0, 0, 1]


def test_bad_layouts_and_patterns_named():
    layout = TokenLayout(6, 2, 2)
    with pytest.raises(ValueError, match=r"^frames: expected a multiple of the world size 4"):
        check_shardable(layout, SparsePattern(window=0), 4)
    with pytest.raises(ValueError, match=r"^window: expected at most the 2 frames per rank"):
        check_shardable(TokenLayout(8, 2, 2), SparsePattern(window=3), 4)
    with pytest.raises(ValueError, match=r"^window: expected fewer than the 6 frames"):
        check_shardable(layout, SparsePattern(window=6), 1)
    with pytest.raises(ValueError, match=r"^sinks: expected at most the 8 tokens of rank 0"):
        check_shardable(TokenLayout(8, 2, 2), SparsePattern(window=1, sinks=9), 4)
    with pytest.raises(ValueError, match=r"^world_size: expected an integer >= 1"):
        check_shardable(layout, SparsePattern(window=0), 0)
    with pytest.raises(ValueError, match=r"^world_size: expected 1, 2, 4 or 8"):
        CheckConfig(world_size=3)
    with pytest.raises(ValueError, match=r"^temporal_radius: expected an integer >= 0"):
        SparsePattern(temporal_radius=-1)
    with pytest.raises(ValueError, match=r"^schedule: "):
        CheckConfig(schedule="eager")


def test_communicator_needs_a_group():
    assert not dist.is_initialized()
    with pytest.raises(ValueError, match=r"^group: expected an initialised"):
        Communicator()


def _bad_call(rank: int) -> list[str]:
    attn = DistributedSparseAttention(TokenLayout(4, 2, 2), SparsePattern(window=1, sinks=0), Communicator())
    q = torch.zeros(1, 2, 8, 4)
    messages = []
    for args in ((q[:, :, :5], q[:, :, :5], q[:, :, :5], torch.zeros(2)), (q, q[..., :3], q, torch.zeros(2)),
                 (q, q, q, torch.tensor([0, 2]))):  # fmt: skip
        try:
            attn(*args)
        except ValueError as err:
            messages.append(str(err).split(":")[0])
    return messages


def test_bad_shards_named_on_every_rank():
    assert spawn_gloo(_bad_call, 2, timeout=60) == [["q", "k, v", "head_types"]] * 2


def _time(rank: int) -> dict[str, float]:
    return time_layer(TokenLayout(4, 2, 2), SparsePattern(window=1, sinks=2), heads=4, head_dim=4, spatial_heads=3,
                      dtype=torch.float32, device=torch.device("cpu"), repeats=1)  # fmt: skip


def test_layer_timing_runs_every_method():
    times = spawn_gloo(_time, 4, timeout=60)[0]
    assert set(times) == {"dsa", "dsa_naive", "ring", "ulysses", "usp"} and min(times.values()) > 0


@pytest.mark.slow
def test_torchrun_entry_points(tmp_path):
    """`evaluate.main` and `scaling.main` as the GPU paths run them, under torchrun (gloo on this CPU)."""
    run = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2", "-m"]
    cfg = json.dumps(CheckConfig(world_size=2, **TINY).to_dict())
    out = subprocess.run([*run, "flowlab.vision_gen.dsa.evaluate", "--config", cfg], capture_output=True, text=True,
                         check=True, env={**os.environ, "OMP_NUM_THREADS": "1"})  # fmt: skip
    _assert_exact({**json.loads(out.stdout.strip().splitlines()[-1]), "agree": True})
    subprocess.run([*run, "flowlab.vision_gen.dsa.scaling", "--out", str(tmp_path / "t.json"), "--frames", "4",
                    "--grid", "2", "--heads", "4", "--head-dim", "4", "--repeats", "1"], check=True,
                   env={**os.environ, "OMP_NUM_THREADS": "1"})  # fmt: skip
    assert {"dsa", "ring", "ulysses"} <= set(json.loads((tmp_path / "t.json").read_text()))
