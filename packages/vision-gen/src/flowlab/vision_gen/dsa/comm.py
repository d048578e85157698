"""The communication DSA and its baselines use, over a real `torch.distributed` process group: paired
point-to-point exchanges, all-to-all (the backend's collective, or paired sends and receives where a backend lacks
it or the chunks are uneven), all-gather; and `CountingCommunicator`, which records the bytes and messages each call
sends from this rank."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch
import torch.distributed as dist

from flowlab.core.validation import check_choice
from flowlab.vision_gen.dsa.names import ALL_TO_ALL

__all__ = ["CommRecord", "Communicator", "CountingCommunicator", "Pending"]


class Pending:
    """An operation in flight: `wait()` finishes it and returns its result (once)."""

    def __init__(self, works: Sequence[object], finish: Callable[[], object]) -> None:
        self._works, self._finish = list(works), finish

    def wait(self) -> object:
        """Wait for every handle, then return what the operation delivers."""
        for work in self._works:
            work.wait()
        self._works = []
        return self._finish()


@dataclass(frozen=True)
class CommRecord:
    """One call of this rank: `op`, the payload `bytes` it sent to other ranks and the number of `messages`."""

    op: str
    bytes: int
    messages: int


class Communicator:
    """This rank's view of a process group (`group`: None for the default one): `rank`, `world_size`, and the
    collectives of sequence-parallel attention. `all_to_all="native"` uses the backend's all-to-all when the chunks
    are equal, "p2p" always pairs sends and receives (the fallback for backends without it)."""

    def __init__(self, group: dist.ProcessGroup | None = None, *, all_to_all: str = "native") -> None:
        if not dist.is_initialized():
            raise ValueError("group: expected an initialised torch.distributed process group (init_process_group)")
        self.group = group
        self.mode = check_choice(all_to_all, ALL_TO_ALL, "all_to_all")
        self.rank = dist.get_rank(group)
        self.world_size = dist.get_world_size(group)

    def _global(self, rank: int) -> int:
        return rank if self.group is None else dist.get_global_rank(self.group, rank)

    def record(self, op: str, nbytes: int, messages: int) -> None:
        """Called by the point-to-point and gather operations with what they send from this rank; a plain
        communicator keeps nothing."""

    def exchange(
        self, sends: Mapping[int, torch.Tensor], recvs: Mapping[int, torch.Tensor], *, tag: int = 0
    ) -> Pending:
        """Send `sends[peer]` to each peer and receive into the buffers `recvs[peer]` (group ranks), all posted at
        once under `tag` (operations in flight together use different tags); every pair of ranks must post matching
        sends and receives. `wait()` returns `recvs`."""
        ops = [dist.P2POp(dist.isend, t.contiguous(), self._global(p), self.group, tag) for p, t in sends.items()]
        ops += [dist.P2POp(dist.irecv, t, self._global(p), self.group, tag) for p, t in recvs.items()]
        self.record("p2p", sum(_nbytes(t) for t in sends.values()), len(sends))
        works = dist.batch_isend_irecv(ops) if ops else []
        return Pending(works, lambda: recvs)

    def all_to_all(self, inputs: Sequence[torch.Tensor], shapes: Sequence[Sequence[int]], *, tag: int = 1) -> Pending:
        """Send `inputs[j]` to group rank j and receive a tensor of `shapes[j]` from each; `wait()` returns the
        received list (chunk j from rank j; this rank's own chunk is copied locally). `tag` marks the fallback's
        point-to-point messages."""
        if len(inputs) != self.world_size or len(shapes) != self.world_size:
            raise ValueError(
                f"inputs, shapes: expected {self.world_size} chunks each, got {len(inputs)}, {len(shapes)}"
            )
        ref = inputs[self.rank]
        outputs = [torch.empty(tuple(s), dtype=ref.dtype, device=ref.device) for s in shapes]
        peers = [j for j in range(self.world_size) if j != self.rank]
        equal = all(tuple(t.shape) == tuple(ref.shape) for t in inputs) and all(
            tuple(s) == tuple(ref.shape) for s in shapes
        )
        if self.mode == "native" and equal:
            work = dist.all_to_all(outputs, [t.contiguous() for t in inputs], group=self.group, async_op=True)
            return Pending([work], lambda: outputs)
        outputs[self.rank] = inputs[self.rank].clone()
        sends = {j: inputs[j] for j in peers if inputs[j].numel()}
        recvs = {j: outputs[j] for j in peers if outputs[j].numel()}
        pending = self.exchange(sends, recvs, tag=tag)
        return Pending([pending], lambda: outputs)

    def all_gather(self, tensor: torch.Tensor) -> list[torch.Tensor]:
        """Every rank's `tensor` (equal shapes), in group-rank order."""
        out = [torch.empty_like(tensor) for _ in range(self.world_size)]
        self.record("all_gather", _nbytes(tensor) * (self.world_size - 1), self.world_size - 1)
        dist.all_gather(out, tensor.contiguous(), group=self.group)
        return out


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


class CountingCommunicator(Communicator):
    """A `Communicator` that keeps a `CommRecord` of every call (`records`): payload bytes sent from this rank to
    other ranks and the number of messages (one per peer a tensor goes to; an all-to-all's own chunk and empty
    chunks are not sent). `reset()` clears the log; `totals()` sums it."""

    def __init__(self, group: dist.ProcessGroup | None = None, *, all_to_all: str = "native") -> None:
        super().__init__(group, all_to_all=all_to_all)
        self._records: list[CommRecord] = []
        self._nested = 0

    @property
    def records(self) -> list[CommRecord]:
        """The calls so far, in order."""
        return list(self._records)

    def record(self, op: str, nbytes: int, messages: int) -> None:
        """Append one call (the point-to-point legs of a fallback all-to-all are logged under "all_to_all")."""
        if self._nested:
            return
        self._records.append(CommRecord(op, int(nbytes), int(messages)))

    def all_to_all(self, inputs: Sequence[torch.Tensor], shapes: Sequence[Sequence[int]], *, tag: int = 1) -> Pending:
        """`Communicator.all_to_all`, logged once as "all_to_all" whichever way it runs."""
        peers = [j for j in range(self.world_size) if j != self.rank and inputs[j].numel()]
        self.record("all_to_all", sum(_nbytes(inputs[j]) for j in peers), len(peers))
        self._nested += 1
        try:
            return super().all_to_all(inputs, shapes, tag=tag)
        finally:
            self._nested -= 1

    def reset(self) -> None:
        """Forget the calls so far."""
        self._records.clear()

    def totals(self) -> dict[str, int]:
        """{"bytes": sent payload bytes, "messages": messages} over the calls so far."""
        return {"bytes": sum(r.bytes for r in self._records),
                "messages": sum(r.messages for r in self._records)}  # fmt: skip
