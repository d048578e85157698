"""torch-geometric works without its compiled extras for message passing; the crowd files parse."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from torch_geometric.nn import MessagePassing
from torch_geometric.utils import scatter

DATA = Path(os.environ.get("FLOWLAB_DATA", "/nonexistent")) / "crowds"


class _SumNeighbours(MessagePassing):
    def __init__(self) -> None:
        super().__init__(aggr="add")

    def forward(self, x, edge_index):
        return self.propagate(edge_index, x=x)


def test_message_passing_sums_incoming_neighbours():
    x = torch.tensor([[1.0], [2.0], [4.0]])
    edge_index = torch.tensor([[0, 1, 2], [1, 2, 1]])  # 0->1, 1->2, 2->1
    out = _SumNeighbours()(x, edge_index)
    assert torch.equal(out, torch.tensor([[0.0], [5.0], [2.0]]))
    assert torch.equal(scatter(torch.ones(3), edge_index[1], dim_size=3, reduce="sum"), torch.tensor([0.0, 2.0, 1.0]))


@pytest.mark.skipif(not DATA.is_dir(), reason=f"crowds data set not found under {DATA}")
def test_ucy_window_is_sampled_every_80_ms():
    import pandas as pd

    frame = pd.read_csv(DATA / "ucy_students03" / "time000-054.csv")
    assert list(frame.columns) == ["ped_id", "frame", "t_seconds", "x", "y"]
    steps = frame.sort_values(["ped_id", "frame"]).groupby("ped_id")["t_seconds"].diff().dropna()
    assert steps.round(2).eq(0.08).mean() > 0.99
