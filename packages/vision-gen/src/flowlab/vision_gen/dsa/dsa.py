"""DSA: distributed sparse attention over N ranks each holding n = S / N frames-major tokens (whole frames).
Spatial heads keep the token shards and attend to their own keys, the two neighbouring shards' boundary frames
that their window reaches (a partial ring of at most two transfers, of `window` frames each) and the attention
sinks (sent once by their owner to the ranks that lack them), merged by online softmax; temporal heads go to head
shards by Ulysses all-to-all and attend over the whole sequence under the temporal mask. Exact with respect to
single-device masked sparse attention."""

from __future__ import annotations

import torch

from flowlab.core.nets import PartialAttention, TokenLayout, merge_partials, partial_attention
from flowlab.core.validation import check_choice
from flowlab.vision_gen.dsa.comm import Communicator, Pending
from flowlab.vision_gen.dsa.masks import SparsePattern, spatial_mask, temporal_mask
from flowlab.vision_gen.dsa.names import SCHEDULES
from flowlab.vision_gen.dsa.sequence_parallel import UlyssesStep

__all__ = ["DistributedSparseAttention", "check_shardable", "sink_tokens"]


def check_shardable(layout: TokenLayout, pattern: SparsePattern, world_size: int) -> int:
    """The frames per rank, after checking that `layout` and `pattern` shard exactly over `world_size` ranks: whole
    frames per rank, the spatial window inside the neighbouring shards, the sinks inside rank 0's shard."""
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size: expected an integer >= 1, got {world_size!r}")
    pattern.check_layout(layout)
    if layout.frames % world_size:
        raise ValueError(f"frames: expected a multiple of the world size {world_size} (whole frames per rank), "
                         f"got {layout.frames}")  # fmt: skip
    per_rank = layout.frames // world_size
    if world_size > 1 and pattern.window > per_rank:
        raise ValueError(f"window: expected at most the {per_rank} frames per rank (the partial ring reaches one "
                         f"shard each side), got {pattern.window}")  # fmt: skip
    if pattern.sinks > per_rank * layout.tokens_per_frame:
        raise ValueError(f"sinks: expected at most the {per_rank * layout.tokens_per_frame} tokens of rank 0's "
                         f"shard, got {pattern.sinks}")  # fmt: skip
    return per_rank


def sink_tokens(rank: int, shard: int, reach: int, sinks: int) -> int:
    """How many of the first `sinks` tokens (rank 0's) rank `rank` receives from rank 0 as its sink block: none on
    rank 0 (its own), on rank 1 those outside the `reach` boundary tokens rank 0 sends it as its neighbour, all of
    them beyond. shard: n tokens per rank."""
    if rank == 0:
        return 0
    return min(sinks, shard - reach) if rank == 1 else sinks


class DistributedSparseAttention:
    """DSA on `comm`'s group for tokens laid out as `layout` under `pattern`'s masks: `attn(q, k, v, head_types)`
    with this rank's shard q, k, v: (B, H, n, D) and head_types: (H,) 0 (spatial) / 1 (temporal), the same on every
    rank -> (B, H, n, D). `schedule` "naive" runs the spatial heads, then the temporal heads; "dynamic" overlaps
    them: the first all-to-all with the local spatial block, the partial ring with the temporal attention (posted
    with the all-to-all when spatial heads dominate, after it otherwise), the second all-to-all with the neighbour
    blocks."""

    def __init__(
        self, layout: TokenLayout, pattern: SparsePattern, comm: Communicator, *, schedule: str = "dynamic"
    ) -> None:
        check_shardable(layout, pattern, comm.world_size)
        self.layout, self.pattern, self.comm = layout, pattern, comm
        self.schedule = check_choice(schedule, SCHEDULES, "schedule")
        self.n = layout.num_tokens // comm.world_size
        r = comm.rank
        self._rows = slice(r * self.n, (r + 1) * self.n)
        # the window's reach into a neighbour's shard: its last (rank r - 1) or first (rank r + 1) m tokens
        self.m = pattern.window * layout.tokens_per_frame if comm.world_size > 1 else 0
        self._neighbours = [p for p in (r - 1, r + 1) if 0 <= p < comm.world_size] if self.m else []
        self._sinks = sink_tokens(r, self.n, self.m, pattern.sinks)
        self._masks: dict[str, torch.Tensor] = {}

    def _mask(self, kind: str, device: torch.device) -> torch.Tensor:
        """The spatial rows of this rank (n, S) or the whole temporal mask (S, S), built once."""
        if kind not in self._masks:
            p = self.pattern
            if kind == "spatial":
                mask = spatial_mask(self.layout, window=p.window, radius=p.spatial_radius, sinks=p.sinks,
                                    device=device)[self._rows]  # fmt: skip
            else:
                mask = temporal_mask(self.layout, radius=p.temporal_radius, sinks=p.sinks, device=device)
            self._masks[kind] = mask
        return self._masks[kind]

    def _check(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, head_types: torch.Tensor) -> None:
        if q.dim() != 4 or q.shape[2] != self.n:
            raise ValueError(f"q: expected this rank's shard (B, H, {self.n}, D), got {tuple(q.shape)}")
        if k.shape != q.shape or v.shape != q.shape:
            raise ValueError(f"k, v: expected the shape of q {tuple(q.shape)}, got {tuple(k.shape)}, {tuple(v.shape)}")
        if head_types.shape != (q.shape[1],) or not bool(((head_types == 0) | (head_types == 1)).all()):
            raise ValueError(f"head_types: expected ({q.shape[1]},) of 0 (spatial) or 1 (temporal), "
                             f"got {head_types.tolist()}")  # fmt: skip

    def _keys(self, p: int) -> slice:
        """The key tokens (global) that neighbour `p` sends this rank: the window's reach into its shard."""
        start = p * self.n + (self.n - self.m if p < self.comm.rank else 0)
        return slice(start, start + self.m)

    def _post_ring(self, kv: torch.Tensor) -> Pending:
        """Send the spatial heads' packed kv (2, B, H_sp, n, D) of the boundary tokens each neighbour's window
        reaches (the first m down, the last m up) and, from rank 0, the sinks each rank lacks (to rank 1 in front
        of its boundary tokens, one message); receive the same."""
        r, n, m = self.comm.rank, self.n, self.m
        sends = {p: kv[..., :m, :] if p < r else kv[..., n - m :, :] for p in self._neighbours}
        recvs = {p: torch.empty_like(kv[..., :m, :]) for p in self._neighbours}
        if r == 0:
            for p in range(1, self.comm.world_size):
                if count := sink_tokens(p, n, m, self.pattern.sinks):
                    sends[p] = torch.cat([kv[..., :count, :], *([sends[p]] if p in sends else [])], dim=-2)
        if self._sinks:
            recvs[0] = torch.empty_like(kv[..., : self._sinks + (m if 0 in recvs else 0), :])
        return self.comm.exchange(sends, recvs, tag=0)

    def _local_block(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> PartialAttention:
        """The spatial heads' attention over this rank's own keys."""
        return partial_attention(q, k, v, self._mask("spatial", q.device)[:, self._rows])

    def _remote_blocks(self, q: torch.Tensor, received: dict[int, torch.Tensor]) -> list[PartialAttention]:
        """The spatial heads' attention over the neighbours' and the sinks' keys."""
        mask, parts = self._mask("spatial", q.device), []
        for p in self._neighbours:
            kv = received[p][..., self._sinks if p == 0 else 0 :, :]
            parts.append(partial_attention(q, kv[0], kv[1], mask[:, self._keys(p)]))
        if self._sinks:
            kv = received[0][..., : self._sinks, :]
            parts.append(partial_attention(q, kv[0], kv[1], mask[:, : self._sinks]))
        return parts

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, head_types: torch.Tensor) -> torch.Tensor:
        """q, k, v: (B, H, n, D) this rank's tokens; head_types: (H,) -> (B, H, n, D)."""
        self._check(q, k, v, head_types)
        sp = (head_types == 0).nonzero().flatten().tolist()
        tp = (head_types == 1).nonzero().flatten().tolist()
        out = torch.empty_like(q)
        if self.schedule == "dynamic" and sp and tp:
            self._dynamic(q, k, v, sp, tp, out)
        else:
            self._naive(q, k, v, sp, tp, out)
        return out

    def _spatial(self, q: torch.Tensor, local: PartialAttention, ring: Pending) -> torch.Tensor:
        """The spatial heads' output: the local block merged with the neighbours' and sinks' blocks."""
        return merge_partials([local, *self._remote_blocks(q, ring.wait())]).out

    def _naive(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sp: list, tp: list, out: torch.Tensor) -> None:
        """The spatial heads (partial ring, then their blocks), then the temporal heads (Ulysses), into `out`."""
        if sp:
            ring = self._post_ring(torch.stack([k[:, sp], v[:, sp]]))
            out[:, sp] = self._spatial(q[:, sp], self._local_block(q[:, sp], k[:, sp], v[:, sp]), ring)
        if tp:
            step = UlyssesStep(self.comm, tag=1)
            step.post_in(q[:, tp], k[:, tp], v[:, tp])
            out[:, tp] = step.post_out(step.compute(self._mask("temporal", q.device))).wait()

    def _dynamic(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sp: list, tp: list, out: torch.Tensor
    ) -> None:
        """Both head types overlapped, into `out`: the local spatial block runs while the first all-to-all is in
        flight, the temporal attention while the partial ring is (posted with the all-to-all when spatial heads
        dominate, after it arrives otherwise), and the neighbour blocks while the second all-to-all is."""
        kv = torch.stack([k[:, sp], v[:, sp]])
        step = UlyssesStep(self.comm, tag=1)
        ring = self._post_ring(kv) if len(sp) >= len(tp) else None
        step.post_in(q[:, tp], k[:, tp], v[:, tp])
        local = self._local_block(q[:, sp], k[:, sp], v[:, sp])
        if ring is None:
            step.gathered()
            ring = self._post_ring(kv)
        back = step.post_out(step.compute(self._mask("temporal", q.device)))
        out[:, sp] = self._spatial(q[:, sp], local, ring)
        out[:, tp] = back.wait()
