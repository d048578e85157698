"""`RoutedLoRA` / `attach_routed_lora`: zero-initialised adapters leave the output unchanged, route None restores the
wrapped module exactly, batched per-sample routing equals each sample alone, gradients reach only the chosen
adapter, and bad arguments are named."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from flowlab.core.nets import RoutedLoRA, attach_routed_lora

pytestmark = pytest.mark.usefixtures("one_thread")


def _net() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.SiLU(), nn.Conv2d(8, 8, 3, padding=1), nn.Flatten(2),
                         nn.Linear(16, 5))  # fmt: skip


def _randomise(wrappers) -> None:
    g = torch.Generator().manual_seed(1)
    for w in wrappers:
        w.up.data = torch.randn(w.up.shape, generator=g)


def test_zero_init_and_route_off_are_exact():
    net, x = _net(), torch.randn(4, 3, 4, 4)
    ref = net(x)
    wrappers = attach_routed_lora(net, ["0", "2", "4"], num_adapters=3, rank=2)
    assert [w.kind for w in wrappers] == ["conv", "conv", "linear"]
    for w in wrappers:
        w.set_route(torch.tensor([0, 1, 2, 1]))
    assert torch.equal(net(x), ref)
    _randomise(wrappers)
    assert not torch.allclose(net(x), ref)
    for w in wrappers:
        w.set_route(None)
    assert torch.equal(net(x), ref)


def test_batched_routing_equals_each_sample_alone():
    net, x = _net(), torch.randn(5, 3, 4, 4, dtype=torch.float64)
    net = net.double()
    wrappers = attach_routed_lora(net, ["0", "4"], num_adapters=4, rank=3)
    _randomise(wrappers)
    for w in wrappers:
        w.up.data = w.up.data.double()
        w.down.data = w.down.data.double()
    idx = torch.tensor([3, 0, 2, 2, 1])
    for w in wrappers:
        w.set_route(idx)
    batched = net(x)
    for i in range(5):
        for w in wrappers:
            w.set_route(idx[i : i + 1])
        assert torch.allclose(net(x[i : i + 1]), batched[i : i + 1], atol=1e-10)


def test_gradient_reaches_only_the_chosen_adapter():
    lora = RoutedLoRA(nn.Conv2d(2, 3, 3, padding=1), num_adapters=4, rank=2)
    lora.up.data.normal_()
    lora.set_route(torch.tensor([2]))
    lora(torch.randn(1, 2, 5, 5)).square().sum().backward()
    assert lora.down.grad[2].abs().sum() > 0 and lora.up.grad[2].abs().sum() > 0
    others = [0, 1, 3]
    assert lora.down.grad[others].abs().sum() == 0 and lora.up.grad[others].abs().sum() == 0


def test_strided_conv_and_block_channels():
    lora = RoutedLoRA(nn.Conv2d(2, 3, 3, stride=2, padding=1), num_adapters=2)
    lora.up.data.normal_()
    lora.set_route(torch.tensor([1, 0]))
    assert lora(torch.randn(2, 2, 8, 8)).shape == (2, 3, 4, 4)
    block = nn.Sequential(nn.Conv2d(4, 6, 3, padding=1), nn.ReLU(), nn.Conv2d(6, 4, 3, padding=1))
    assert RoutedLoRA(block).down.shape == (4, 4, 4, 3, 3)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"num_adapters": 0}, "num_adapters"), ({"rank": 1.5}, "rank"), ({"kind": "attn"}, "kind"),
     ({"kernel_size": 2}, "kernel_size"), ({"kind": "linear"}, "base")],
)  # fmt: skip
def test_bad_arguments_are_named(kwargs, name):
    with pytest.raises(ValueError, match=name):
        RoutedLoRA(nn.Conv2d(2, 2, 3), **kwargs)


def test_bad_routes_and_names():
    lora = RoutedLoRA(nn.Conv2d(2, 2, 3, padding=1), num_adapters=2)
    for bad in (torch.tensor([2]), torch.tensor([[0]]), torch.tensor([0.0]), [0]):
        with pytest.raises(ValueError, match="idx"):
            lora.set_route(bad)
    lora.set_route(torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="route holds 2"):
        lora(torch.randn(3, 2, 4, 4))
    net = _net()
    with pytest.raises(ValueError, match="names"):
        attach_routed_lora(net, ["9"])
    attach_routed_lora(net, ["0"])
    with pytest.raises(ValueError, match="already"):
        attach_routed_lora(net, ["0"])
