"""The README's ten lines run as written and learn a real distribution; public API conventions hold."""

from __future__ import annotations

import inspect

import torch

import flowlab.core as fc
from flowlab.core import AffinePath, StandardNormal, grids, likelihood, losses, schedules, solvers
from flowlab.core.nets import TimeMLP


def test_ten_lines_train_sample_and_score_a_gaussian():
    """Train CondOT flow matching on N(m, s^2 I) in 2-D; samples match its moments and the NLL its entropy."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    mean, std = torch.tensor([2.0, -1.0]), 0.5
    net = TimeMLP(2, hidden=(64, 64), time_scale=1.0)
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    path, source = AffinePath(schedules.CondOT()), StandardNormal(event_shape=(2,))
    for _ in range(400):
        x1 = mean + std * torch.randn(256, 2, generator=g)
        s = path.sample(source.sample(len(x1), generator=g), x1, torch.rand(len(x1), generator=g))
        losses.flow_matching_loss(net(x=s.x_t, t=s.t), s).backward()
        opt.step()
        opt.zero_grad()
    with torch.inference_mode():
        x = solvers.solve_ode(net, source.sample(2048, generator=g), grids.uniform(32), method="heun")
        logp = likelihood.log_likelihood(net, x, source=source, grid=grids.uniform(32).flip(0)).log_prob
    assert torch.allclose(x.mean(0), mean, atol=0.08)
    assert torch.allclose(x.std(0), torch.full((2,), std), atol=0.08)
    entropy = 2 * (0.5 * torch.log(torch.tensor(2 * torch.pi * torch.e * std**2)))
    assert abs(float(-logp.mean()) - float(entropy)) < 0.15


def _public_functions():
    for module in (fc.solvers, fc.likelihood, fc.losses, fc.couplings, fc.distributions, fc.metrics, fc.flowmaps):
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            if inspect.isfunction(obj):
                yield f"{module.__name__}.{name}", obj


def test_no_tensor_default_arguments():
    bad = [
        name
        for name, fn in _public_functions()
        for p in inspect.signature(fn).parameters.values()
        if isinstance(p.default, torch.Tensor)
    ]
    assert not bad, f"tensor default arguments: {bad}"


def test_random_functions_take_a_generator():
    """A public function that draws random numbers (its source calls a torch sampler) accepts `generator=`."""
    samplers = ("torch.randn", "torch.rand(", "torch.randint", "torch.multinomial", "randn(", "sample_times(")
    missing = []
    for name, fn in _public_functions():
        source = inspect.getsource(fn)
        if any(s in source for s in samplers) and "generator" not in inspect.signature(fn).parameters:
            missing.append(name)
    assert not missing, f"random functions without generator=: {missing}"
