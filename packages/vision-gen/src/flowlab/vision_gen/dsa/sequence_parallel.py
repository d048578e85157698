"""Sequence-parallel attention on a `Communicator`, every rank holding a contiguous shard of n = S / N tokens: ring
attention (N - 1 key/value transfers merged by online softmax), Ulysses (all-to-all to head shards and back, with
uneven head splits) and USP (Ulysses within groups of consecutive ranks, ring across them). Dense baselines of DSA;
its temporal heads reuse the Ulysses steps."""

from __future__ import annotations

import torch
import torch.distributed as dist

from flowlab.core.nets import merge_partials, partial_attention
from flowlab.vision_gen.dsa.comm import Communicator, CountingCommunicator, Pending

__all__ = [
    "UlyssesStep",
    "head_splits",
    "ring_attention",
    "ulysses_attention",
    "usp_attention",
    "usp_communicators",
]


def head_splits(heads: int, world_size: int) -> list[int]:
    """How many of `heads` heads each of `world_size` ranks holds under Ulysses: as even as possible, the first
    ranks one more."""
    base, extra = divmod(heads, world_size)
    return [base + (j < extra) for j in range(world_size)]


class UlyssesStep:
    """One Ulysses attention in its phases, so a schedule can overlap them: `post_in(q, k, v)` all-to-all of the
    local (B, H, n, D) shards to head shards of the full sequence, `gathered()` those (3, B, h, S, D), `compute(mask)`
    attention over all S tokens for this rank's h heads, `post_out(out)` all-to-all back; `Pending.wait()` of the
    last returns (B, H, n, D)."""

    def __init__(self, comm: Communicator, *, tag: int = 1) -> None:
        self.comm, self.tag = comm, tag

    def post_in(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> Pending:
        """Start sending each rank its heads of the local tokens (q, k, v packed in one message per peer)."""
        qkv = torch.stack([q, k, v])  # (3, B, H, n, D)
        self.splits = head_splits(q.shape[1], self.comm.world_size)
        self.shape = tuple(q.shape)
        chunks = list(torch.split(qkv, self.splits, dim=2))
        b, _, n, d = self.shape
        mine = self.splits[self.comm.rank]
        self._in = self.comm.all_to_all(chunks, [(3, b, mine, n, d)] * self.comm.world_size, tag=self.tag)
        return self._in

    def gathered(self) -> torch.Tensor:
        """(3, B, h, S, D): q, k, v of this rank's heads over the whole sequence (waits for `post_in`)."""
        return torch.cat(self._in.wait(), dim=3)

    def compute(self, mask: torch.Tensor | None) -> torch.Tensor:
        """(B, h, S, D): attention of this rank's heads over the gathered sequence; `mask`: None (dense) or (S, S)
        bool."""
        qkv = self.gathered()
        return partial_attention(qkv[0], qkv[1], qkv[2], mask).out

    def post_out(self, out: torch.Tensor) -> Pending:
        """Start returning each rank its tokens of `out` (B, h, S, D); `wait()` gives (B, H, n, D)."""
        b, _, n, d = self.shape
        chunks = list(torch.split(out, n, dim=2))
        pending = self.comm.all_to_all(chunks, [(b, h, n, d) for h in self.splits], tag=self.tag + 1)
        return Pending([pending], lambda: torch.cat(pending.wait(), dim=1))


def ulysses_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, comm: Communicator, *, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Ulysses attention: q, k, v: this rank's (B, H, n, D) token shard -> (B, H, n, D); `mask` (S, S) bool or
    None (dense)."""
    step = UlyssesStep(comm)
    step.post_in(q, k, v)
    return step.post_out(step.compute(mask)).wait()


def ring_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, comm: Communicator) -> torch.Tensor:
    """Dense ring attention: q, k, v: this rank's (B, H, n, D) token shard -> (B, H, n, D). Keys and values (one
    packed message) travel N - 1 times around the ring, each transfer overlapped with the previous block's
    attention, and the blocks are merged by online softmax."""
    rank, world = comm.rank, comm.world_size
    kv, parts = torch.stack([k, v]), []
    for step in range(world):
        pending = None
        if step < world - 1:
            pending = comm.exchange({(rank + 1) % world: kv}, {(rank - 1) % world: torch.empty_like(kv)})
        parts.append(partial_attention(q, kv[0], kv[1]))
        if pending is not None:
            kv = pending.wait()[(rank - 1) % world]
    return merge_partials(parts).out


def usp_communicators(
    ulysses_degree: int, *, counting: bool = False, all_to_all: str = "native"
) -> tuple[Communicator, Communicator]:
    """The (Ulysses, ring) communicators of USP on the default group of N = u * r ranks: Ulysses groups of
    `ulysses_degree` consecutive ranks, ring groups of the ranks at the same place in each. Every rank must call it
    (it creates all the groups)."""
    world = dist.get_world_size()
    if ulysses_degree < 1 or world % ulysses_degree:
        raise ValueError(f"ulysses_degree: expected a divisor of the world size {world}, got {ulysses_degree}")
    rank, ring_degree = dist.get_rank(), world // ulysses_degree
    kind = CountingCommunicator if counting else Communicator
    mine: dict[str, Communicator] = {}
    for g in range(ring_degree):
        group = dist.new_group([g * ulysses_degree + i for i in range(ulysses_degree)])
        if rank // ulysses_degree == g:
            mine["ulysses"] = kind(group, all_to_all=all_to_all)
    for i in range(ulysses_degree):
        group = dist.new_group([g * ulysses_degree + i for g in range(ring_degree)])
        if rank % ulysses_degree == i:
            mine["ring"] = kind(group, all_to_all=all_to_all)
    return mine["ulysses"], mine["ring"]


def usp_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, ulysses: Communicator, ring: Communicator
) -> torch.Tensor:
    """Dense USP attention (Ulysses x ring): q, k, v: this rank's (B, H, n, D) token shard -> (B, H, n, D).
    Ulysses within `ulysses`'s group gathers its ranks' tokens for a share of the heads, ring attention across
    `ring`'s group covers the other groups' tokens, and Ulysses sends the result back."""
    step = UlyssesStep(ulysses)
    step.post_in(q, k, v)
    qkv = step.gathered()
    return step.post_out(ring_attention(qkv[0], qkv[1], qkv[2], ring)).wait()
