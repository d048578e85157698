"""Training: bit-exact resume, EMA half-life, tensor-only checkpoints, DDP == one process, clipping, overfitting."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import pickletools
import socket
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch
from torch import nn

from flowlab.core.train import (
    EMA,
    cpu_state_dict,
    fit,
    init_distributed,
    is_distributed,
    latest_checkpoint,
    load_checkpoint,
    save_checkpoint,
    shard_batch,
    spawn_gloo,
)
from flowlab.core.train import checkpoint as checkpoint_module

F64 = torch.float64
WORKER = Path(__file__).with_name("ddp_worker_core.py")


def _mse(model, batch, generator):
    x, y = batch
    return (model(x) - y).pow(2).mean(), {}


def _regression(n=16, seed=0):
    """y = x @ w + b + noise with x: (n, 3); returns (x, y) in float64."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 3, generator=g, dtype=F64)
    w = torch.tensor([[1.5], [-2.0], [0.5]], dtype=F64)
    return x, x @ w + 0.3 + 0.05 * torch.randn(n, 1, generator=g, dtype=F64)


def _run(model, data, **kwargs):
    kwargs.setdefault("optimizer", torch.optim.SGD(model.parameters(), lr=0.1))
    kwargs.setdefault("device", "cpu")
    kwargs.setdefault("generator", torch.Generator().manual_seed(0))
    kwargs.setdefault("progress", False)
    return fit(model, _mse, data, **kwargs)


# --------------------------------------------------------------------------------------------- resume


class _Killed(Exception):
    pass


def _noisy_problem(seed):
    """A small MLP with dropout (global torch RNG), noisy targets (training generator), Adam, a LambdaLR and an
    EMA with warm-up: every piece of state a resume has to restore."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Dropout(0.2), nn.Linear(16, 1)).to(F64)
    opt = torch.optim.Adam(model.parameters(), lr=0.03)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (1.0 + 0.1 * s))
    ema = EMA(model, half_life_samples=20.0, warmup_steps=2)
    return model, opt, sched, ema


def _noisy_data(step, generator):
    x = torch.randn(8, 2, generator=generator, dtype=F64)
    return x, torch.sin(3 * x[:, :1]) * x[:, 1:]


def _noisy_loss(model, batch, generator):
    x, y = batch
    target = y + 0.1 * torch.randn(y.shape, generator=generator, dtype=F64)
    err = model(x) - target
    return err.pow(2).mean(), {"mae": err.abs().mean()}


def _fit_noisy(parts, generator, **kwargs):
    model, opt, sched, ema = parts
    return fit(
        model, _noisy_loss, _noisy_data, steps=10, optimizer=opt, lr_schedule=sched, ema=ema, grad_clip=0.5,
        accumulate=2, device="cpu", generator=generator, log_every=1, progress=False, **kwargs,
    )  # fmt: skip


def test_killed_and_resumed_run_is_bit_exact(tmp_path):
    ref_parts = _noisy_problem(0)
    ref = _fit_noisy(ref_parts, torch.Generator().manual_seed(5))

    def kill_at_8(info):
        if info.step == 8:
            raise _Killed

    with pytest.raises(_Killed):
        _fit_noisy(_noisy_problem(0), torch.Generator().manual_seed(5), ckpt_dir=tmp_path, ckpt_every=3,
                   callbacks=[kill_at_8])  # fmt: skip
    assert latest_checkpoint(tmp_path).name == "step-000000006"  # steps 7 and 8 are lost with the "crash"

    # a new process: different initial weights, generator seed and global RNG; everything must come from disk
    parts = _noisy_problem(1)
    torch.manual_seed(999)
    out = _fit_noisy(parts, torch.Generator().manual_seed(123), ckpt_dir=tmp_path, ckpt_every=3)
    assert out.resumed_from.name == "step-000000006"
    assert (out.steps, out.samples_seen) == (10, 80)

    model, opt, sched, ema = parts
    ref_model, ref_opt, ref_sched, ref_ema = ref_parts
    for (name, p), q in zip(model.named_parameters(), ref_model.parameters()):
        assert torch.equal(p, q), name
    for name, t in ema.shadow.items():
        assert torch.equal(t, ref_ema.shadow[name]), name
    for p, q in zip(model.parameters(), ref_model.parameters()):
        for key in ("exp_avg", "exp_avg_sq"):
            assert torch.equal(opt.state[p][key], ref_opt.state[q][key])
    assert sched.get_last_lr() == ref_sched.get_last_lr()
    # the loss curve of the replayed steps 7..10 is the same, bit for bit
    assert list(out.history) == list(ref.history[6:])
    assert out.history[-1]["samples_seen"] == 80


def test_model_state_a_callback_changes_is_in_that_steps_checkpoint(tmp_path):
    """A callback that updates the model after each step (a Polyak target copy, as in RL) runs before the step's
    checkpoint, so a run resumed from it equals the uninterrupted run bit for bit."""

    class WithTarget(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Linear(3, 1).to(F64)
            self.register_buffer("target", torch.zeros(4, dtype=F64))

        def forward(self, x):
            return self.net(x)

    def polyak(info):
        flat = torch.cat([p.detach().flatten() for p in info.model.net.parameters()])
        info.model.target.lerp_(flat, 0.5)

    def run(folder, steps, seed=0):
        torch.manual_seed(seed)
        model = WithTarget()
        _run(model, [_regression()], steps=steps, ckpt_dir=folder, ckpt_every=2, callbacks=[polyak])
        return model

    straight = run(tmp_path / "a", 5)
    run(tmp_path / "b", 2)  # stopped after the step-2 checkpoint
    resumed = run(tmp_path / "b", 5, seed=1)
    assert torch.equal(resumed.target, straight.target) and torch.equal(resumed.net.weight, straight.net.weight)


def test_resume_of_a_finished_run_trains_no_further(tmp_path):
    x, y = _regression()
    calls = []

    def counting(step, generator):
        calls.append(step)
        return x, y

    _run(nn.Linear(3, 1).to(F64), counting, steps=3, ckpt_dir=tmp_path, ckpt_every=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-000000002", "step-000000003"]
    out = _run(nn.Linear(3, 1).to(F64), counting, steps=3, ckpt_dir=tmp_path)
    assert (out.steps, out.resumed_from.name, calls) == (3, "step-000000003", [0, 1, 2])
    out = _run(nn.Linear(3, 1).to(F64), counting, steps=5, ckpt_dir=tmp_path)
    assert (out.steps, out.samples_seen, calls) == (5, 80, [0, 1, 2, 3, 4])  # continues at step index 3
    fresh = _run(nn.Linear(3, 1).to(F64), counting, steps=1, ckpt_dir=tmp_path, resume=False)
    assert fresh.resumed_from is None and fresh.steps == 1


# --------------------------------------------------------------------------------------------- EMA


def _scalar_model(value=0.0):
    model = nn.Linear(1, 1, bias=False).to(F64)
    with torch.no_grad():
        model.weight.fill_(value)
    return model


def _set(model, value):
    with torch.no_grad():
        model.weight.fill_(value)


def test_ema_half_life_is_counted_in_samples():
    # a half-life of H samples: after H samples of a constant target the average has covered half the gap,
    # however those samples were batched
    model = _scalar_model(0.0)
    ema = EMA(model, half_life_samples=100.0)
    _set(model, 1.0)
    for b in (10, 30, 60):
        ema.update(b)
    assert math.isclose(ema.shadow["weight"].item(), 0.5, rel_tol=1e-12)
    for _ in range(100):
        ema.update(1)
    assert math.isclose(ema.shadow["weight"].item(), 0.75, rel_tol=1e-12)
    assert math.isclose(ema.decay_for(100), 0.5, rel_tol=1e-15)


def test_ema_fixed_decay_warmup_and_constant_fixed_point():
    model = _scalar_model(0.0)
    ema = EMA(model, decay=0.5**0.25, warmup_steps=2)  # half-life of 4 updates once warm
    for v in (3.0, -1.0):  # warm-up: the average is the weights themselves
        _set(model, v)
        ema.update()
        assert ema.shadow["weight"].item() == v
    _set(model, 1.0)
    for _ in range(4):
        ema.update()
    assert math.isclose(ema.shadow["weight"].item(), 0.0, abs_tol=1e-12)  # half-way from -1 to 1
    const = EMA(_scalar_model(2.5), decay=0.9)
    for _ in range(10):
        const.update()
    assert const.shadow["weight"].item() == 2.5


def test_ema_swap_restores_weights_and_state_round_trips():
    model = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3)).to(F64)
    ema = EMA(model, decay=0.9)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    model(torch.randn(5, 2, dtype=F64))  # moves BatchNorm's running statistics (buffers)
    ema.update()
    trained = {k: v.clone() for k, v in model.state_dict().items()}
    with ema.swap() as swapped:
        assert swapped is model
        for name, t in model.state_dict().items():
            assert torch.equal(t, ema.shadow[name]), name
        assert torch.allclose(model[0].weight, 0.9 * before["0.weight"] + 0.1 * trained["0.weight"])
    for name, t in model.state_dict().items():
        assert torch.equal(t, trained[name]), name
    with pytest.raises(RuntimeError), ema.swap():
        raise RuntimeError("evaluation failed")
    assert torch.equal(model[0].weight, trained["0.weight"])

    other = EMA(nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3)).to(F64), decay=0.9)
    other.load_state_dict(ema.state_dict())
    assert other.num_updates == 1
    for name, t in ema.shadow.items():
        assert torch.equal(other.shadow[name], t)
    with pytest.raises(ValueError, match="state"):
        EMA(nn.Linear(2, 3), decay=0.9).load_state_dict(ema.state_dict())
    assert ema.copy_to_model() is model  # for good: the averaged weights and buffers stay
    for name, t in model.state_dict().items():
        assert torch.equal(t, ema.shadow[name]), name


def test_ema_rejects_bad_arguments():
    model = _scalar_model()
    with pytest.raises(ValueError, match="exactly one"):
        EMA(model)
    with pytest.raises(ValueError, match="exactly one"):
        EMA(model, decay=0.9, half_life_samples=10.0)
    with pytest.raises(ValueError, match="decay"):
        EMA(model, decay=1.0)
    with pytest.raises(ValueError, match="half_life_samples"):
        EMA(model, half_life_samples=0.0)
    with pytest.raises(ValueError, match="batch_size"):
        EMA(model, half_life_samples=10.0).update()


# --------------------------------------------------------------------------------------------- checkpoints


_ALLOWED_GLOBALS = {
    ("torch._utils", "_rebuild_tensor_v2"),
    ("collections", "OrderedDict"),
}


def _pickle_globals(weights: Path) -> set[tuple[str, str]]:
    """Every class or function the pickle inside a torch.save zip refers to."""
    with zipfile.ZipFile(weights) as z:
        (name,) = [n for n in z.namelist() if n.endswith("/data.pkl")]
        data = z.read(name)
    found, strings = set(), []
    for op, arg, _ in pickletools.genops(data):
        if op.name == "GLOBAL":
            found.add(tuple(arg.split(" ", 1)))
        elif op.name == "STACK_GLOBAL":
            found.add((strings[-2], strings[-1]))
        elif isinstance(arg, str):
            strings.append(arg)
    return found


def _trained_parts(tmp_path, **kwargs):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1)).to(F64)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.9**s)
    ema = EMA(model, decay=0.99)
    gen = torch.Generator().manual_seed(3)
    out = fit(
        model, _mse, lambda s, g: _regression(seed=s), steps=2, optimizer=opt, lr_schedule=sched, ema=ema,
        device="cpu", generator=gen, ckpt_dir=tmp_path, progress=False, **kwargs,
    )  # fmt: skip
    return model, opt, sched, ema, gen, out


def test_cpu_state_dict_is_a_detached_cpu_copy_that_loads_back(tmp_path):
    net = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    net(torch.randn(8, 3)).sum().backward()  # BatchNorm's running stats move; the weights hold gradients
    state = cpu_state_dict(net)
    assert list(state) == list(net.state_dict())  # buffers too, in order
    assert all(t.device.type == "cpu" and not t.requires_grad for t in state.values())
    torch.save(state, tmp_path / "w.pt")
    twin = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    twin.load_state_dict(torch.load(tmp_path / "w.pt", weights_only=True))
    for name, value in net.state_dict().items():
        assert torch.equal(twin.state_dict()[name], value), name


def test_checkpoint_is_tensors_and_json_only(tmp_path):
    *_, out = _trained_parts(tmp_path, model_kwargs={"width": 4}, config={"lr": 1e-2})
    folder = out.checkpoint
    assert folder == latest_checkpoint(tmp_path) == tmp_path / "step-000000002"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-000000002"]  # no temporary folders left
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "weights.pt"]

    state = torch.load(folder / "weights.pt", map_location="cpu", weights_only=True)
    assert (state["step"], state["samples_seen"]) == (2, 32)
    assert set(state) >= {"model", "optimizer", "lr_schedule", "ema", "rng"}
    assert all(isinstance(s, torch.Tensor) and s.dtype == torch.uint8 for v in state["rng"].values() for s in v)
    globals_used = _pickle_globals(folder / "weights.pt")
    storages = {g for g in globals_used if g[0] == "torch" and g[1].endswith("Storage")}
    assert globals_used - storages <= _ALLOWED_GLOBALS, globals_used

    config = json.loads((folder / "config.json").read_text())
    assert config["model"] == {"class": "torch.nn.modules.container.Sequential", "kwargs": {"width": 4}}
    assert config["optimizer"]["class"] == "torch.optim.adam.Adam"
    assert config["lr_schedule"]["class"] == "torch.optim.lr_scheduler.LambdaLR"
    assert config["ema"]["decay"] == 0.99
    assert (config["step"], config["samples_seen"], config["config"]) == (2, 32, {"lr": 1e-2})
    assert config["versions"]["torch"] == torch.__version__
    assert "git_sha" in config


def test_checkpoint_round_trip_restores_every_state(tmp_path):
    model, opt, sched, ema, gen, out = _trained_parts(tmp_path)
    torch.manual_seed(42)
    model2 = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1)).to(F64)
    opt2 = torch.optim.Adam(model2.parameters(), lr=1e-2)
    sched2 = torch.optim.lr_scheduler.LambdaLR(opt2, lambda s: 0.9**s)
    ema2, gen2 = EMA(model2, decay=0.99), torch.Generator().manual_seed(0)
    cpu_rng_now = torch.get_rng_state()
    loaded = load_checkpoint(tmp_path, model=model2, optimizer=opt2, lr_schedule=sched2, ema=ema2, generator=gen2)
    assert (loaded.step, loaded.samples_seen, loaded.path) == (2, 32, out.checkpoint)
    for p, q in zip(model.parameters(), model2.parameters()):
        assert torch.equal(p, q)
    for name, t in ema.shadow.items():
        assert torch.equal(ema2.shadow[name], t)
    assert opt2.state_dict()["state"][0]["step"] == opt.state_dict()["state"][0]["step"]
    assert sched2.last_epoch == sched.last_epoch == 2 and opt2.param_groups[0]["lr"] == opt.param_groups[0]["lr"]
    assert torch.equal(torch.rand(4, generator=gen2), torch.rand(4, generator=gen))  # generator restored
    torch.set_rng_state(cpu_rng_now)

    with pytest.raises(FileNotFoundError, match="path"):
        load_checkpoint(tmp_path / "nowhere", model=model2)
    bare = tmp_path / "bare"
    save_checkpoint(bare, model=model, step=1, samples_seen=5)
    with pytest.raises(ValueError, match="optimizer"):
        load_checkpoint(bare, model=model2, optimizer=opt2)
    with pytest.raises(ValueError, match="model_kwargs"):
        save_checkpoint(bare, model=model, step=1, samples_seen=5, model_kwargs={"act": nn.ReLU()})
    wider = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 1)).to(F64)
    with pytest.raises(ValueError, match=r"^path: the model state in .*weights.* does not fit this model \(Error"):
        load_checkpoint(bare, model=wider)  # another network: one line naming the file, not load_state_dict's
    next(bare.rglob("config.json")).write_text("{not json")
    with pytest.raises(ValueError, match=r"^path: .*config\.json is corrupt, not JSON"):
        load_checkpoint(bare, model=model2)
    diverged = tmp_path / "diverged"
    with torch.no_grad():
        model[0].weight[0, 0] = float("nan")
    save_checkpoint(diverged, model=model, step=1, samples_seen=5)
    with pytest.raises(ValueError, match=r"non-finite weights \(0\.weight\)"):
        load_checkpoint(diverged, model=model2)


def test_checkpoint_write_is_atomic(tmp_path, monkeypatch):
    model = nn.Linear(2, 2).to(F64)
    first = save_checkpoint(tmp_path, model=model, step=10, samples_seen=100)

    def crash(obj, f):
        f.write(b"half a file")
        raise OSError("disk full")

    monkeypatch.setattr(checkpoint_module.torch, "save", crash)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(tmp_path, model=model, step=20, samples_seen=200)
    with pytest.raises(OSError, match="disk full"):  # re-saving an existing step must not lose the old one
        save_checkpoint(tmp_path, model=model, step=10, samples_seen=100)
    assert [p.name for p in tmp_path.iterdir()] == [first.name]
    assert latest_checkpoint(tmp_path) == first
    assert load_checkpoint(first, model=nn.Linear(2, 2).to(F64)).step == 10


# --------------------------------------------------------------------------------------------- fit contract


def test_exactly_one_of_steps_or_samples():
    x, y = _regression()
    for kwargs in ({}, {"steps": 2, "samples": 32}):
        with pytest.raises(ValueError, match="exactly one"):
            _run(nn.Linear(3, 1).to(F64), lambda s, g: (x, y), **kwargs)
    with pytest.raises(ValueError, match="steps"):
        _run(nn.Linear(3, 1).to(F64), lambda s, g: (x, y), steps=0)
    with pytest.raises(ValueError, match="samples"):
        _run(nn.Linear(3, 1).to(F64), lambda s, g: (x, y), samples=-5)


def test_samples_budget_and_samples_seen_are_recorded(tmp_path):
    x, y = _regression(n=8)
    seen = []
    out = _run(
        nn.Linear(3, 1).to(F64), lambda s, g: (x, y), samples=50, ckpt_dir=tmp_path, ckpt_every=3, log_every=3,
        callbacks=[lambda info: seen.append((info.step, info.samples_seen, info.logs is not None))],
    )  # fmt: skip
    # 50 samples at 8 per step: the 7th step crosses the budget
    assert (out.steps, out.samples_seen) == (7, 56)
    assert seen == [(s, 8 * s, s in (3, 6, 7)) for s in range(1, 8)]
    assert [(r["step"], r["samples_seen"]) for r in out.history] == [(3, 24), (6, 48), (7, 56)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-000000003", "step-000000006", "step-000000007"]
    last = tmp_path / "step-000000007"
    assert json.loads((last / "config.json").read_text())["samples_seen"] == 56
    assert torch.load(last / "weights.pt", weights_only=True)["samples_seen"] == 56


def test_grad_clipping_caps_the_update():
    # loss = (w.x - y)^2 at w = 0 has gradient -2 y x; with SGD(lr=1) the update is minus the (clipped) gradient
    x = torch.tensor([[3.0, 0.0, 4.0, 0.0]], dtype=F64)
    y = torch.tensor([[10.0]], dtype=F64)
    grad = -2 * 10.0 * x[0]  # norm 100
    for clip, expected in ((0.5, -grad * 0.5 / 100.0), (None, -grad), (1e3, -grad)):
        model = nn.Linear(4, 1, bias=False).to(F64)
        nn.init.zeros_(model.weight)
        opt = torch.optim.SGD(model.parameters(), lr=1.0)
        out = _run(model, lambda s, g: (x, y), steps=1, optimizer=opt, grad_clip=clip, log_every=1)
        # clip_grad_norm_ scales by max_norm / (norm + 1e-6): exact to ~1e-8 relative here
        assert torch.allclose(model.weight[0], expected, rtol=1e-7, atol=0)
        if clip is not None:
            assert math.isclose(out.logs["grad_norm"], 100.0, rel_tol=1e-12)


@pytest.mark.parametrize("batch,accumulate", [(8, 4), (10, 3)])
def test_accumulation_gives_the_same_update(batch, accumulate):
    x, y = _regression(n=batch)
    params = []
    for acc in (1, accumulate):
        torch.manual_seed(0)
        model = nn.Linear(3, 1).to(F64)
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        out = _run(model, lambda s, g: (x, y), steps=3, optimizer=opt, accumulate=acc, grad_clip=None, log_every=1)
        params.append((torch.cat([p.detach().flatten() for p in model.parameters()]), out.history[0]["loss"]))
    assert torch.allclose(params[0][0], params[1][0], rtol=1e-12, atol=1e-14)
    assert math.isclose(params[0][1], params[1][1], rel_tol=1e-12)


def test_overfitting_a_linear_regression_reaches_least_squares():
    x, y = _regression(n=32, seed=4)
    torch.manual_seed(0)
    model = nn.Linear(3, 1).to(F64)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    out = _run(model, iter(lambda: (x, y), None), steps=300, optimizer=opt, log_every=10, progress=True)
    design = torch.cat([x, torch.ones(32, 1, dtype=F64)], dim=1)
    best = torch.linalg.lstsq(design, y).solution.flatten()
    got = torch.cat([model.weight.flatten(), model.bias]).detach()
    assert torch.allclose(got, best, atol=1e-5), (got, best)
    optimum = (design @ best - y.flatten()).pow(2).mean().item()
    losses = [r["loss"] for r in out.history]
    assert losses[-1] < 1e-3 * losses[0]
    assert math.isclose(losses[-1], optimum, rel_tol=1e-4)


def test_bad_data_and_loss_functions_raise():
    x, y = _regression(n=4)
    with pytest.raises(ValueError, match="data"):
        _run(nn.Linear(3, 1).to(F64), x, steps=1)
    with pytest.raises(ValueError, match="ran out"):
        _run(nn.Linear(3, 1).to(F64), iter([(x, y)]), steps=2)
    out = _run(nn.Linear(3, 1).to(F64), [(x, y), (x[:2], y[:2])], steps=5)  # a list is cycled
    assert out.samples_seen == 4 + 2 + 4 + 2 + 4
    with pytest.raises(ValueError, match="batch"):
        _run(nn.Linear(3, 1).to(F64), lambda s, g: (x, y[:3]), steps=1)
    with pytest.raises(ValueError, match="accumulate"):
        _run(nn.Linear(3, 1).to(F64), lambda s, g: (x, y), steps=1, accumulate=8)

    def returning(loss, logs):
        return lambda m, b, g: (loss(m, b), logs)

    opt_kwargs = {"steps": 1, "device": "cpu", "generator": torch.Generator(), "progress": False}
    model = nn.Linear(3, 1).to(F64)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="loss_fn"):
        fit(model, lambda m, b, g: m(b[0]).mean(), lambda s, g: (x, y), optimizer=opt, **opt_kwargs)
    with pytest.raises(ValueError, match="scalar"):
        fit(model, returning(lambda m, b: m(b[0]), {}), lambda s, g: (x, y), optimizer=opt, **opt_kwargs)
    with pytest.raises(ValueError, match="reserved"):
        fit(model, returning(lambda m, b: m(b[0]).mean(), {"loss": 1.0}), lambda s, g: (x, y), optimizer=opt,
            **opt_kwargs)  # fmt: skip
    with pytest.raises(FloatingPointError, match="loss"):
        fit(model, returning(lambda m, b: m(b[0]).mean() * math.inf, {}), lambda s, g: (x, y), optimizer=opt,
            **opt_kwargs)  # fmt: skip


# --------------------------------------------------------------------------------------------- distributed


def test_shard_batch_slices_every_tensor():
    batch = {"x": torch.arange(12).reshape(6, 2), "pair": (torch.arange(6), torch.zeros(6, 3))}
    shards = [shard_batch(batch, rank=r, world_size=3) for r in range(3)]
    assert torch.equal(torch.cat([s["x"] for s in shards]), batch["x"])
    assert torch.equal(shards[1]["pair"][0], torch.tensor([2, 3]))
    assert isinstance(shards[2]["pair"], tuple) and shards[2]["pair"][1].shape == (2, 3)
    assert torch.equal(shard_batch(batch["x"]), batch["x"])  # one process: the whole batch
    with pytest.raises(ValueError, match="divisible"):
        shard_batch(batch, rank=0, world_size=4)
    with pytest.raises(ValueError, match="rank"):
        shard_batch(batch, rank=3, world_size=3)


def test_init_distributed_without_torchrun_is_a_single_process(monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    info = init_distributed(device="cpu")
    assert (info.rank, info.world_size, info.local_rank, info.device, info.is_main) == (
        0, 1, 0, torch.device("cpu"), True,
    )  # fmt: skip
    assert not is_distributed()
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    with pytest.raises(ValueError, match="MASTER_ADDR"):
        init_distributed(device="cpu")
    monkeypatch.setenv("RANK", "two")
    with pytest.raises(ValueError, match="RANK"):
        init_distributed(device="cpu")


def _load_worker():
    spec = importlib.util.spec_from_file_location("ddp_worker_core", WORKER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _loopback_env() -> dict[str, str]:
    env = {"OMP_NUM_THREADS": "1"}
    loopback = [name for _, name in socket.if_nameindex() if name == "lo"]
    if loopback:
        env["GLOO_SOCKET_IFNAME"] = loopback[0]
    return env


def _ddp_child(rank: int, worker, out_dir: str) -> None:
    worker.train(out_dir)  # spawn_gloo has joined the group: init_distributed() inside finds it


def _check_ddp_against_one_process(ddp_dir: Path, single: dict) -> None:
    ranks = [torch.load(ddp_dir / f"rank{r}.pt", weights_only=True) for r in range(2)]
    assert [(r["rank"], r["world_size"], r["is_main"]) for r in ranks] == [(0, 2, True), (1, 2, False)]
    for key in ("params", "grads", "ema"):
        for name, t in single[key].items():
            assert torch.equal(ranks[0][key][name], ranks[1][key][name]), (key, name)  # ranks agree exactly
            # the same as one process with the global batch, up to summation order
            assert torch.allclose(ranks[0][key][name], t, rtol=1e-12, atol=1e-14), (key, name)
    for key in ("loss", "abs_err"):  # all-reduced metrics equal the global-batch metrics
        assert torch.allclose(ranks[0][key], single[key], rtol=1e-12, atol=0), key
        assert torch.equal(ranks[0][key], ranks[1][key])
    assert ranks[0]["samples_seen"] == ranks[1]["samples_seen"] == single["samples_seen"] == 32
    # only rank 0 wrote checkpoints, and it holds every rank's generator state
    assert sorted(p.name for p in (ddp_dir / "ckpt").iterdir()) == ["step-000000001", "step-000000002"]
    state = torch.load(ddp_dir / "ckpt" / "step-000000002" / "weights.pt", weights_only=True)
    assert len(state["rng"]["generator"]) == 2
    assert not torch.equal(state["rng"]["generator"][0], state["rng"]["generator"][1])  # seeds 7 and 8


def test_two_process_gloo_step_matches_one_process(tmp_path):
    worker = _load_worker()
    single = worker.train(tmp_path / "single")
    spawn_gloo(_ddp_child, 2, worker, str(tmp_path), timeout=60)
    _check_ddp_against_one_process(tmp_path, single)


@pytest.mark.slow
def test_torchrun_two_processes_match_one_process(tmp_path):
    worker = _load_worker()
    single = worker.train(tmp_path / "single")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
           "--master-port", str(_free_port()), str(WORKER), str(tmp_path)]  # fmt: skip
    done = subprocess.run(
        cmd, env={**os.environ, **_loopback_env()}, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    _check_ddp_against_one_process(tmp_path, single)


def test_parallel_map_gives_the_in_process_results_and_checks_workers():
    from flowlab.core.bench import parallel_map

    expected = [pow(b, e) for b, e in zip([2, 3, 4], [3, 2, 1], strict=True)]
    assert parallel_map(pow, [2, 3, 4], [3, 2, 1], workers=1) == expected
    assert parallel_map(pow, [2, 3, 4], [3, 2, 1], workers=2) == expected  # spawned processes, order kept
    with pytest.raises(ValueError, match="workers"):
        parallel_map(pow, [2], [3], workers=0)


def test_a_worker_pool_serves_several_parallel_maps_in_the_same_processes():
    import multiprocessing
    import os
    from pathlib import Path

    from flowlab.core.bench import parallel_map, worker_pool

    with worker_pool(2) as pool:
        if pool is None:  # a one-core machine: parallel_map runs in this process
            assert parallel_map(pow, [2, 3], [3, 2], workers=2) == [8, 9]
            return
        if not Path("/proc/self").exists():
            pytest.skip("needs /proc/self to read a worker's pid")
        pids = set(parallel_map(os.readlink, ["/proc/self"] * 8, workers=2, pool=pool))
        pids |= set(parallel_map(os.readlink, ["/proc/self"] * 8, workers=2, pool=pool))
        assert parallel_map(pow, [2, 3, 4], [3, 2, 1], workers=2, pool=pool) == [8, 9, 4]
        alive = {str(p.pid) for p in multiprocessing.active_children()}  # a pool of parallel_map's own has exited
    assert pids <= alive and len(alive) <= 2 and str(os.getpid()) not in pids
    with pytest.raises(ValueError, match="workers"), worker_pool(0):
        pass


def _jobs_example():
    """pow jobs where "c" waits on "a" and "b" and "d" on "c": c = a + b = 8 + 9, d = c ** 2."""
    from flowlab.core.bench import Job

    return {
        "a": Job(pow, (2, 3), cost=1.0),
        "b": Job(pow, (3, 2), cost=5.0),
        "c": Job(sum, lambda done: ([done["a"], done["b"]],), after=("a", "b"), cost=9.0),
        "d": Job(pow, lambda done: (done["c"], 2), after=("c",)),
    }


def test_parallel_jobs_feed_results_forward_in_process_and_in_workers():
    from flowlab.core.bench import parallel_jobs, worker_pool

    expected = {"a": 8, "b": 9, "c": 17, "d": 289}
    assert parallel_jobs(_jobs_example(), workers=1) == expected
    assert parallel_jobs(_jobs_example(), workers=2) == expected  # spawned processes
    with worker_pool(2) as pool:
        assert parallel_jobs(_jobs_example(), workers=2, pool=pool) == expected


def test_parallel_jobs_start_the_costliest_ready_job_first():
    from flowlab.core.bench import Job, parallel_jobs

    order: list[str] = []

    def record(name):
        order.append(name)
        return name

    jobs = {
        "cheap": Job(record, ("cheap",), cost=1.0),
        "dear": Job(record, ("dear",), cost=3.0),
        "dearest_later": Job(record, ("dearest_later",), after=("cheap",), cost=10.0),
        "tie": Job(record, ("tie",), cost=3.0),
    }
    parallel_jobs(jobs, workers=1)
    # "dear" before its equal "tie" (declared first); "dearest_later" as soon as "cheap" has run
    assert order == ["dear", "tie", "cheap", "dearest_later"]


def test_parallel_jobs_name_unknown_inputs_cycles_and_failures():
    from flowlab.core.bench import Job, parallel_jobs

    with pytest.raises(ValueError, match="'after' names no job"):
        parallel_jobs({"a": Job(pow, (2, 3), after=("z",))}, workers=1)
    with pytest.raises(ValueError, match="cycle"):
        parallel_jobs({"a": Job(pow, (2, 3), after=("b",)), "b": Job(pow, (2, 3), after=("a",))}, workers=1)
    with pytest.raises(TypeError, match="expected a Job"):
        parallel_jobs({"a": (pow, 2, 3)}, workers=1)
    with pytest.raises(ValueError, match="workers"):
        parallel_jobs(_jobs_example(), workers=0)
    with pytest.raises(ZeroDivisionError):  # a job's own error reaches the caller from a worker
        parallel_jobs({"a": Job(divmod, (1, 0)), "b": Job(pow, (2, 3))}, workers=2)


class _NotATensor:
    """A class a weights-only load must refuse (pickling it would run arbitrary code on load)."""


def test_load_weights_reads_tensors_and_names_every_bad_file(tmp_path):
    from flowlab.core.train import load_weights

    good = tmp_path / "good.pt"
    torch.save({"w": torch.ones(2)}, good)
    assert torch.equal(load_weights(good)["w"], torch.ones(2))
    torch.save({"obj": _NotATensor()}, tmp_path / "pickled.pt")
    (tmp_path / "empty.pt").write_bytes(b"")
    (tmp_path / "garbage.pt").write_bytes(b"not a torch file at all")
    for file, message in (("missing.pt", "not found"), ("pickled.pt", "objects other than tensors"),
                          ("empty.pt", "empty or corrupt"), ("garbage.pt", "corrupt")):  # fmt: skip
        with pytest.raises(ValueError, match=f"weights: .*{file}.*{message}") as info:
            load_weights(tmp_path / file, name="weights")
        assert "weights_only=False" not in str(info.value)


# ---------------------------------------------------------------- run folders


def test_claim_run_resumes_the_same_run_and_refuses_another(tmp_path):
    from flowlab.core.train import RUN_FILE, claim_run, data_fingerprint

    x = torch.arange(6.0).view(2, 3)
    spec = {"command": "train", "config": {"lr": 1e-3, "hidden": [8, 8]}, "data": data_fingerprint(x)}
    run = claim_run(tmp_path / "run", spec)
    assert (run / RUN_FILE).is_file()
    (run / "ckpt").mkdir()
    with pytest.raises(ValueError, match=r"^out: .* holds this run already; pass --resume .* or --overwrite"):
        claim_run(run, spec)  # the same run again: never continued (nor replaced) silently
    same = dict(reversed(list(spec.items())))  # key order does not matter
    assert claim_run(run, same, resume=True) == run and (run / "ckpt").is_dir()
    with pytest.raises(ValueError, match="not both"):
        claim_run(run, spec, resume=True, overwrite=True)
    other = {**spec, "data": data_fingerprint(x + 1)}
    with pytest.raises(ValueError, match=r"^out: .* holds another run: data"):
        claim_run(run, other)
    assert (run / "ckpt").is_dir()  # refused: nothing touched
    wider = {**spec, "config": {"lr": 1e-3, "hidden": [16, 16]}}
    with pytest.raises(ValueError, match=r"holds another run: config\.hidden \(\[8, 8\] there, \[16, 16\] now\);"):
        claim_run(run, wider)  # a nested setting is named by its path, alone
    claim_run(run, other, overwrite=True)
    assert not (run / "ckpt").exists() and json.loads((run / RUN_FILE).read_text())["data"] == other["data"]
    stray = tmp_path / "stray"
    stray.mkdir()
    (stray / "notes.txt").write_text("mine")
    for overwrite in (False, True):  # a folder that is not a run is never deleted
        with pytest.raises(ValueError, match=r"--ckpt-dir: .* holds no run\.json"):
            claim_run(stray, spec, overwrite=overwrite, name="--ckpt-dir")
    assert (stray / "notes.txt").read_text() == "mine"
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="is a file"):
        claim_run(tmp_path / "file", spec)
    with pytest.raises(ValueError, match="spec"):
        claim_run(tmp_path / "bad", {"x": object()})
    failed = claim_run(tmp_path / "failed", spec)  # a run that stopped before writing anything
    claim_run(failed, other)
    assert json.loads((failed / RUN_FILE).read_text())["data"] == other["data"]


def test_data_fingerprint_tells_data_apart():
    from flowlab.core.train import data_fingerprint

    x = torch.randn(4, 3, generator=torch.Generator().manual_seed(0))
    assert data_fingerprint(x) == data_fingerprint(x.clone())
    assert data_fingerprint(x[:, 0]) == data_fingerprint(x[:, 0].contiguous())  # a strided view reads its values
    y = x.clone()
    y[2, 1] += 1e-6
    for other in (y, x.double(), x.reshape(3, 4), x[:3]):
        assert data_fingerprint(other) != data_fingerprint(x)
    assert data_fingerprint(torch.tensor(1.0)) != data_fingerprint(torch.tensor(2.0))
    assert data_fingerprint(x, x) != data_fingerprint(x)


def test_assert_same_tensors_compares_two_runs_bit_for_bit(tmp_path):
    from safetensors.torch import save_file

    from flowlab.core.testing import assert_same_tensors

    state = {"net": {"w": torch.arange(6.0).reshape(2, 3)}, "step": 3, "rng": [torch.tensor([1, 2], dtype=torch.uint8)]}
    for run in ("a", "b"):
        (tmp_path / run / "ckpt").mkdir(parents=True)
        torch.save(state, tmp_path / run / "ckpt" / "state.pt")
        save_file({"w": state["net"]["w"]}, tmp_path / run / "model.safetensors")
    assert_same_tensors(tmp_path / "a", tmp_path / "b", "**/*.pt")
    assert_same_tensors(tmp_path / "a", tmp_path / "b", "*.safetensors")
    nudged = {**state, "net": {"w": state["net"]["w"] + 1e-7}}
    torch.save(nudged, tmp_path / "b" / "ckpt" / "state.pt")
    with pytest.raises(AssertionError, match=r"ckpt/state.pt.net.w"):
        assert_same_tensors(tmp_path / "a", tmp_path / "b", "**/*.pt")
    torch.save({**state, "step": 4}, tmp_path / "b" / "ckpt" / "state.pt")
    with pytest.raises(AssertionError, match=r"state.pt.step"):
        assert_same_tensors(tmp_path / "a", tmp_path / "b", "**/*.pt")
    (tmp_path / "b" / "ckpt" / "state.pt").rename(tmp_path / "b" / "ckpt" / "other.pt")
    with pytest.raises(AssertionError, match="different files"):
        assert_same_tensors(tmp_path / "a", tmp_path / "b", "**/*.pt")


def test_train_settings_reject_each_bad_field_by_name_and_subclasses_keep_the_checks():
    from dataclasses import dataclass

    from flowlab.core.train import TrainSettings

    @dataclass(frozen=True)
    class Mine(TrainSettings):
        steps: int = 7  # a redeclared default keeps the field's place and its check
        width: int = 4

    assert Mine().steps == 7 and Mine(lr=0.5).to_dict() == {"steps": 7, "batch_size": 64, "lr": 0.5,
                                                            "ema_decay": 0.999, "seed": 0, "width": 4}  # fmt: skip
    for field, value in (("steps", 0), ("batch_size", -1), ("lr", 0.0), ("lr", float("inf")), ("lr", float("nan")),
                         ("ema_decay", 1.0), ("ema_decay", -0.1), ("seed", -1), ("seed", 2**63)):  # fmt: skip
        with pytest.raises(ValueError, match=f"^{field}: "):
            Mine(**{field: value})
