"""GFM training, benchmarks and CLI: the semigroup defect of the trained map falls with training, every objective
trains to a finite loss, the scenarios run end to end on a tiny budget, and `flowlab manifold` round-trips."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

import flowlab.core.gfm.benchmarks.protocol as gfm_protocol
from flowlab.core.bench import BenchContext
from flowlab.core.gfm import GFMConfig, build_flow_map, random_torus_mixture, semigroup_error, train_gfm
from flowlab.core.gfm.benchmarks import SCENARIOS
from flowlab.core.gfm.benchmarks.earth import EARTH, EarthBench, run_earth
from flowlab.core.gfm.benchmarks.protocol import data_floor, model_config
from flowlab.core.gfm.benchmarks.synthetic import TORUS7_QUICK, HyperbolicBench, run_hyperbolic
from flowlab.core.gfm.cli import app
from flowlab.core.gfm.data import load_earth, split
from flowlab.core.gfm.evaluate import mmd_by_nfe, reference_bandwidth
from flowlab.core.gfm.train import flow_map_for, scheduled_lr, zero_head
from flowlab.core.manifolds import FlatTorus, Sphere
from flowlab.core.nets import seeded_init


@pytest.fixture(autouse=True)
def _single_thread():
    """Two torch threads on the shared, loaded 2-core machine are several times slower than one."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _relative_defect(model, manifold, x_0, x_1, seed):
    g = torch.Generator().manual_seed(seed)
    return semigroup_error(model, x_0, x_1, manifold=manifold, generator=g, relative=True)


def test_semigroup_defect_of_the_trained_map_decreases():
    torus = FlatTorus(2)
    mix = random_torus_mixture(2, components=2, scale=0.3, generator=torch.Generator().manual_seed(0))
    data = mix.sample(2000, generator=torch.Generator().manual_seed(1)).float()
    x_0 = torus.random_base(256, generator=torch.Generator().manual_seed(2))
    x_1 = mix.sample(256, generator=torch.Generator().manual_seed(3)).float()
    defects = {}

    def record(info):
        if info.step in (20, 200):
            defects[info.step] = _relative_defect(info.model, torus, x_0, x_1, 4)

    cfg = GFMConfig(objective="psd", steps=200, batch_size=64, hidden=(32, 32), lr=3e-3, ema_decay=0.9)
    train_gfm(torus, data, cfg, generator=torch.Generator().manual_seed(5), callbacks=(record,))
    assert defects[200] < 0.6 * defects[20], defects


def test_training_is_reproducible_from_the_generator_alone():
    """Initial weights and batches come from `generator`: the global RNG neither moves the result nor is moved."""
    sphere = Sphere(2)
    data = sphere.random_base(64, generator=torch.Generator().manual_seed(0))
    cfg = GFMConfig(objective="lsd", steps=3, batch_size=16, hidden=(8,))
    states = []
    for global_seed in (1, 2):
        torch.manual_seed(global_seed)
        before = torch.get_rng_state()
        out = train_gfm(sphere, data, cfg, generator=torch.Generator().manual_seed(7))
        assert torch.equal(torch.get_rng_state(), before)
        states.append(out.flow_map.state_dict())
    assert all(torch.equal(states[0][k], states[1][k]) for k in states[0])


@pytest.mark.parametrize("objective", ["lsd", "esd", "psd", "mf", "rfm"])
def test_every_objective_trains_on_the_sphere(objective):
    sphere = Sphere(2)
    data = sphere.projx(
        torch.tensor([0.0, 0.0, 1.0]) + 0.2 * torch.randn(200, 3, generator=torch.Generator().manual_seed(0))
    )
    cfg = GFMConfig(objective=objective, steps=30, batch_size=32, hidden=(16,), lr=3e-3)
    out = train_gfm(sphere, data, cfg, generator=torch.Generator().manual_seed(1), log_every=15)
    first, last = out.history[0]["loss"], out.history[-1]["loss"]
    assert torch.isfinite(torch.tensor([first, last])).all()
    if objective != "mf":  # the diagonal RFM term dominates early and falls; the MF target moves with the model
        assert out.history[-1]["rfm"] < out.history[0]["rfm"]
    with pytest.raises(ValueError, match="data"):
        train_gfm(sphere, 2 * data, cfg, generator=torch.Generator())


def test_teacher_distillation_pulls_the_diagonal_onto_the_teacher_and_is_checked():
    """distill="teacher": the student's v_{t,t} regresses onto a frozen teacher field, whatever the data says."""
    torus = FlatTorus(2)
    data = torus.random_base(256, generator=torch.Generator().manual_seed(0))
    with seeded_init(torch.Generator().manual_seed(1)):
        teacher = build_flow_map(torus, hidden=(16,))
    before = {k: v.clone() for k, v in teacher.state_dict().items()}
    x = torus.random_base(512, generator=torch.Generator().manual_seed(2))
    t = torch.rand(512, generator=torch.Generator().manual_seed(3))

    def gap(model):
        with torch.no_grad():
            return float((model.diagonal_field(x=x, t=t) - teacher.diagonal_field(x=x, t=t)).square().mean())

    cfg = GFMConfig(objective="lsd", distill="teacher", steps=150, batch_size=64, hidden=(16,), lr=3e-3)
    gaps = {}
    out = train_gfm(
        torus, data, cfg, generator=torch.Generator().manual_seed(4), teacher=teacher.diagonal_field,
        callbacks=(lambda info: gaps.setdefault(info.step, gap(info.model)) if info.step == 1 else None,),
    )  # fmt: skip
    assert gap(out.flow_map) < 0.2 * gaps[1], (gaps, gap(out.flow_map))
    assert all(torch.equal(before[k], v) for k, v in teacher.state_dict().items())  # the teacher stays frozen
    with pytest.raises(ValueError, match="teacher"):
        train_gfm(torus, data, replace(cfg, steps=1), generator=torch.Generator())
    with pytest.raises(ValueError, match="teacher"):
        train_gfm(torus, data, replace(cfg, steps=1, distill="self"), generator=torch.Generator(), teacher=teacher)
    with pytest.raises(ValueError, match="distill"):
        replace(cfg, objective="psd")
    with pytest.raises(ValueError, match="objectives"):
        replace(TORUS7_QUICK, train=replace(TORUS7_QUICK.train, distill="teacher"), objectives=("psd",))
    teaching = replace(TORUS7_QUICK, train=replace(TORUS7_QUICK.train, distill="teacher"))
    assert (model_config(teaching, "rfm", 10).distill, model_config(teaching, "lsd", 10).distill) == ("self", "teacher")


def test_anchored_distillation_keeps_the_teacher_diagonal_and_trains_the_jump():
    """distill="anchored": the map's v_{t,t} is the teacher's field exactly throughout; the LSD loss of its jumps
    falls with training; the teacher stays frozen and out of the saved weights; the options are checked."""
    torus = FlatTorus(2)
    data = (
        random_torus_mixture(2, generator=torch.Generator().manual_seed(0))
        .sample(512, generator=torch.Generator().manual_seed(5))
        .float()
    )
    with seeded_init(torch.Generator().manual_seed(1)):
        teacher = build_flow_map(torus, hidden=(16,)).requires_grad_(False)  # frozen, as AnchoredFlowMap asks
    before = {k: v.clone() for k, v in teacher.state_dict().items()}
    cfg = GFMConfig(objective="lsd", distill="anchored", steps=200, batch_size=64, hidden=(32,), lr=3e-3)
    out = train_gfm(
        torus, data, cfg, generator=torch.Generator().manual_seed(4), teacher=teacher.diagonal_field, log_every=10
    )
    x = torus.random_base(256, generator=torch.Generator().manual_seed(2))
    t = torch.rand(256, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        torch.testing.assert_close(
            out.flow_map.diagonal_field(x=x, t=t), teacher.diagonal_field(x=x, t=t), rtol=0, atol=0
        )
    sd = [row["sd"] for row in out.history]
    assert sum(sd[-3:]) < 0.5 * sum(sd[:3]), sd
    assert all(row["rfm"] == 0 for row in out.history)  # no diagonal rows: the diagonal is the teacher's
    assert all(torch.equal(before[k], v) for k, v in teacher.state_dict().items())
    assert set(out.flow_map.state_dict()) == {f"net.{k}" for k in out.flow_map.net.state_dict()}
    with pytest.raises(ValueError, match="diag_fraction"):
        replace(cfg, diag_fraction=0.25)
    with pytest.raises(ValueError, match="source_fraction"):
        replace(cfg, source_fraction=1.5)
    with pytest.raises(ValueError, match="distill"):
        replace(cfg, objective="mf")
    with pytest.raises(ValueError, match="teacher"):
        train_gfm(torus, data, replace(cfg, steps=1), generator=torch.Generator())
    with pytest.raises(ValueError, match="teacher"):
        flow_map_for(torus, cfg)
    # the bench's warm start: RFM's features with a zero output layer, so the map starts as the teacher's Euler step
    start = flow_map_for(torus, replace(cfg, hidden=(16,)), teacher=teacher.diagonal_field)
    start.load_state_dict(zero_head(teacher.state_dict()))
    s = 0.5 * t
    with torch.no_grad():
        euler = torus.expmap(x, (t - s)[:, None] * teacher.diagonal_field(x=x, t=s))
        torch.testing.assert_close(start(x=x, s=s, t=t), euler, rtol=0, atol=0)
    kept = [
        k for k in teacher.state_dict() if not torch.equal(zero_head(teacher.state_dict())[k], teacher.state_dict()[k])
    ]
    assert kept == ["net.mlp.out.weight", "net.mlp.out.bias"], kept
    with pytest.raises(ValueError, match="state"):
        zero_head({"scale": torch.ones(())})
    rfm, lsd = model_config(TORUS7_QUICK, "rfm", 10), model_config(TORUS7_QUICK, "lsd", 10)  # the torus7 recipe
    assert (rfm.distill, rfm.source_fraction, lsd.distill, lsd.source_fraction) == ("self", 0.0, "anchored", 0.5)
    assert lsd.lsd_derivative == "fd_forward"  # two maps a row: the 10-minute wall (RESULTS.md)


def test_scheduled_lr_is_the_training_schedule():
    """The warm-started GFM phase starts where the RFM schedule was: scheduled_lr equals torch's cosine schedule."""
    cfg = GFMConfig(steps=40, lr=3e-3, lr_min=1e-5)
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=cfg.lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=cfg.steps, eta_min=cfg.lr_min)
    for step in range(cfg.steps + 1):
        assert scheduled_lr(cfg, step) == pytest.approx(opt.param_groups[0]["lr"], rel=1e-9, abs=1e-12)
        opt.step()
        sched.step()
    with pytest.raises(ValueError, match="step"):
        scheduled_lr(cfg, 41)


def test_earth_variants_set_the_diagonal_share_per_objective_and_the_mmd_protocol():
    """The earth variants give G-LSD half of each batch on the diagonal; RFM and the other objectives keep their
    defaults (a single number would have moved RFM off its pure diagonal loss too). Their MMDs are taken against all
    held-out data, from the spec's 2000 model samples."""
    for variant in ("quick", "full"):
        cfg = EARTH.variants[variant]
        assert model_config(cfg, "lsd", 10).diag_fraction == 0.5
        assert all(model_config(cfg, o, 10).diag_fraction is None for o in ("rfm", "psd", "esd", "mf"))
        assert cfg.mmd_reference == "val+test" and cfg.samples == 2000


def test_scenarios_registered_and_hyperbolic_runs_on_a_tiny_budget(tmp_path):
    assert {s.name for s in SCENARIOS} == {"core.gfm.earth", "core.gfm.torus", "core.gfm.torus7", "core.gfm.hyperbolic"}
    assert all({"quick", "full"} <= set(s.variants) for s in SCENARIOS)
    cfg = HyperbolicBench(
        train=GFMConfig(steps=12, batch_size=32, hidden=(16,), lr=3e-3, ema_decay=0.9), objectives=("lsd", "psd"),
        warm_start=10, samples=64, nll_steps=2, n_train=300, n_test=64,
    )  # fmt: skip
    ctx = BenchContext(0, "quick", cfg, torch.device("cpu"), torch.Generator().manual_seed(0), tmp_path, None)
    result = run_hyperbolic(ctx)
    assert {"disk/mmd_nfe1", "disk/mmd_nfe100", "disk/nll", "disk/kl", "disk/mmd1_ratio_vs_rfm"} <= set(result.metrics)
    assert set(result.baselines) == {"RFM", "G-PSD", "data floor"}
    floor = result.baselines["data floor"]
    assert floor["disk/mmd1_ratio_vs_rfm"] == floor["disk/mmd_nfe1"] / result.baselines["RFM"]["disk/mmd_nfe1"]
    assert floor["disk/mmd_split_floor"] > 0 and "disk/mmd_split_floor" not in result.metrics  # one per data set
    assert result.metrics["disk/manifold_err_nfe1"] < 1  # the largest sample norm on the disk
    assert len(result.curves) == 1


@pytest.mark.skipif(not os.environ.get("FLOWLAB_DATA"), reason="FLOWLAB_DATA is not set (earth_sphere data set)")
def test_earth_data_sets_in_worker_processes_match_one_process(tmp_path):
    """Each earth data set seeds its own generator, so running them in spawned processes changes no number."""
    cfg = EarthBench(
        train=GFMConfig(steps=12, batch_size=32, hidden=(16,), lr=3e-3, ema_decay=0.9), objectives=("lsd",),
        warm_start=10, samples=64, nll_steps=2, datasets=("volcano", "flood"),
    )  # fmt: skip
    root = Path(os.environ["FLOWLAB_DATA"])
    rows = []
    for workers in (1, 2):
        config = replace(cfg, workers=workers)
        result = run_earth(BenchContext(0, "quick", config, torch.device("cpu"), torch.Generator(), tmp_path, root))
        timings = ("train_s", "ms_per_step", "step_cost_vs_rfm")
        rows.append({k: v for k, v in result.metrics.items() if not k.endswith(timings)})
    assert rows[0] == rows[1] and {"volcano/mmd_nfe1", "flood/mmd_nfe1"} <= set(rows[0])


@pytest.mark.skipif(not os.environ.get("FLOWLAB_DATA"), reason="FLOWLAB_DATA is not set (earth_sphere data set)")
def test_earth_mmd_reference_is_the_held_out_data(tmp_path, monkeypatch):
    """With mmd_reference "val+test" the model MMDs and the data floor are taken against the validation and test
    splits together (166 volcano points), with "test" against the test split alone (83); NLL stays on the test
    split; other values are refused."""
    cfg = EarthBench(
        train=GFMConfig(steps=4, batch_size=32, hidden=(16,), lr=3e-3, ema_decay=0.9), objectives=("lsd",),
        warm_start=2, samples=64, nll_steps=2, datasets=("volcano",), workers=1,
    )  # fmt: skip
    root = Path(os.environ["FLOWLAB_DATA"])
    results, sizes, seen = {}, {}, []

    def spy(flow_map, ref, **kwargs):
        seen.append(len(ref))
        return mmd_by_nfe(flow_map, ref, **kwargs)

    monkeypatch.setattr(gfm_protocol, "mmd_by_nfe", spy)
    for reference in ("test", "val+test"):
        seen.clear()
        config = replace(cfg, mmd_reference=reference)
        ctx = BenchContext(0, "quick", config, torch.device("cpu"), torch.Generator(), tmp_path, root)
        results[reference], sizes[reference] = run_earth(ctx), set(seen)
    assert sizes == {"test": {83}, "val+test": {166}}
    parts = split(load_earth("volcano", root), 0)
    for reference, held_out in (("test", parts.test), ("val+test", torch.cat([parts.val, parts.test]))):
        median = reference_bandwidth(held_out, manifold=Sphere(2))
        bandwidth = [median / 2**j for j in range(4)]
        floor = data_floor(parts.train, held_out, Sphere(2), bandwidth, n=64, seed=0)
        assert results[reference].baselines["data floor"]["volcano/mmd_nfe1"] == pytest.approx(floor, rel=1e-12)
    assert results["test"].metrics["volcano/nll"] == results["val+test"].metrics["volcano/nll"]
    with pytest.raises(ValueError, match=r"^EarthBench.mmd_reference: expected Literal\['test', 'val\+test'\]"):
        replace(cfg, mmd_reference="val")
    with pytest.raises(TypeError, match="mmd_refrence"):
        replace(cfg, mmd_refrence="test")  # a misspelt field is an error, not a silent default


def test_cli_distils_from_a_teacher_run_and_names_bad_teacher_options(tmp_path: Path):
    runner = CliRunner()
    base = ["--data", "torus:2", "--steps", "6", "--batch-size", "32", "--hidden", "16,16", "--no-progress"]
    teacher = tmp_path / "rfm"
    assert runner.invoke(app, ["train", *base, "--out", str(teacher), "--objective", "rfm"]).exit_code == 0
    student = tmp_path / "lsd"
    res = runner.invoke(app, ["train", *base, "--out", str(student), "--teacher", str(teacher), "--warm-start"])
    assert res.exit_code == 0, res.output
    meta = json.loads((student / "config.json").read_text())
    assert meta["config"]["distill"] == "teacher" and meta["teacher"] == str(teacher.resolve()) and meta["warm_start"]
    res = runner.invoke(app, ["sample", "--run", str(student), "--out", str(tmp_path / "x.pt"), "--n", "8"])
    assert res.exit_code == 0, res.output  # the run reloads: distill is a recorded config field
    bad = {
        "--teacher": ["--objective", "psd", "--teacher", str(teacher)],  # G-PSD has no velocity target
        "--warm-start": ["--warm-start"],  # no teacher to start from
    }
    for option, extra in bad.items():
        res = runner.invoke(app, ["train", *base, "--out", str(tmp_path / "bad"), *extra])
        assert res.exit_code == 2 and option in res.output, (option, res.output)
    other = tmp_path / "t3"
    args = ["train", "--data", "torus:3", "--steps", "2", "--batch-size", "8", "--hidden", "8", "--no-progress"]
    assert runner.invoke(app, [*args, "--out", str(other), "--objective", "rfm"]).exit_code == 0
    for extra, words in (
        (["--teacher", str(other)], "FlatTorus(3)"),  # another manifold
        (["--teacher", str(teacher), "--warm-start", "--hidden", "8"], "architecture"),  # weights that do not fit
        (["--teacher", str(tmp_path / "none")], "config.json"),  # no run there
    ):
        res = runner.invoke(app, ["train", *base, "--out", str(tmp_path / "bad"), *extra])
        assert res.exit_code == 2 and words in res.output, (extra, res.output)


def test_cli_anchored_run_reloads_on_its_teacher_and_shares_its_likelihood(tmp_path: Path):
    """--anchored: the run records distill "anchored" and its teacher; evaluate rebuilds the map on that teacher, so
    its NLL (the diagonal's) is the teacher run's to the digit while its 1-NFE jumps differ; a moved teacher and the
    options that do not go with --anchored are named."""
    runner = CliRunner()
    base = ["--data", "torus:2", "--steps", "6", "--batch-size", "32", "--hidden", "16,16", "--no-progress"]
    teacher, student = tmp_path / "rfm", tmp_path / "anchored"
    assert runner.invoke(app, ["train", *base, "--out", str(teacher), "--objective", "rfm"]).exit_code == 0
    res = runner.invoke(app, ["train", *base, "--out", str(student), "--teacher", str(teacher), "--anchored"])
    assert res.exit_code == 0, res.output
    assert json.loads((student / "config.json").read_text())["config"]["distill"] == "anchored"
    metrics = {}
    for run in (teacher, student):
        res = runner.invoke(app, ["evaluate", "--run", str(run), "--nfe", "1", "--n", "50", "--nll-steps", "2"])
        assert res.exit_code == 0, res.output
        metrics[run.name] = json.loads(res.output.strip().splitlines()[-1])
    assert metrics["anchored"]["nll"] == metrics["rfm"]["nll"]
    assert metrics["anchored"]["mmd_nfe1"] != metrics["rfm"]["mmd_nfe1"]
    # the torus7 recipe: the correction starts from the teacher's features with a zero head, half the pairs at s = 0
    recipe = tmp_path / "recipe"
    args = ["--teacher", str(teacher), "--anchored", "--warm-start", "--source-fraction", "0.5"]
    res = runner.invoke(app, ["train", *base, "--out", str(recipe), *args, "--lsd-derivative", "fd_forward"])
    assert res.exit_code == 0, res.output
    config = json.loads((recipe / "config.json").read_text())["config"]
    assert (config["source_fraction"], config["lsd_derivative"]) == (0.5, "fd_forward")
    for extra, option in (
        (["--anchored"], "--anchored"),  # no teacher
        (["--anchored", "--teacher", str(teacher), "--objective", "psd"], "--anchored"),
        (["--anchored", "--teacher", str(teacher), "--source-fraction", "1.5"], "--source-fraction"),
        (["--anchored", "--teacher", str(teacher), "--warm-start", "--hidden", "8"], "--warm-start"),  # misfit
        (["--anchored", "--teacher", str(teacher), "--lsd-derivative", "backward"], "--lsd-derivative"),
    ):
        res = runner.invoke(app, ["train", *base, "--out", str(tmp_path / "bad"), *extra])
        assert res.exit_code == 2 and option in res.output, (extra, res.output)
    teacher.rename(tmp_path / "moved")
    res = runner.invoke(app, ["sample", "--run", str(student), "--out", str(tmp_path / "x.pt"), "--n", "8"])
    assert res.exit_code == 2 and "teacher run" in res.output, res.output


def test_cli_train_sample_evaluate_round_trip(tmp_path: Path):
    runner = CliRunner()
    run = tmp_path / "run"
    args = ["train", "--data", "torus:2", "--out", str(run), "--objective", "psd", "--steps", "10"]
    args += ["--fourier-dim", "8", "--fourier-scale", "2"]  # sample and evaluate rebuild the same architecture
    res = runner.invoke(app, [*args, "--batch-size", "32", "--hidden", "16,16", "--no-progress"])
    assert res.exit_code == 0, res.output
    config = json.loads((run / "config.json").read_text())["config"]
    assert (run / "model.pt").is_file() and config["steps"] == 10 and config["fourier_dim"] == 8
    res = runner.invoke(app, ["sample", "--run", str(run), "--out", str(tmp_path / "x.csv"), "--n", "20", "--nfe", "2"])
    assert res.exit_code == 0, res.output
    rows = (tmp_path / "x.csv").read_text().split()
    assert len(rows) == 20 and all(len(r.split(",")) == 2 for r in rows)
    args = ["evaluate", "--run", str(run), "--nfe", "1,2", "--n", "50", "--nll-steps", "2"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    metrics = json.loads(res.output.strip().splitlines()[-1])
    assert {"mmd_nfe1", "mmd_nfe2", "mmd_split_floor", "nll", "kl"} <= set(metrics)
    res = runner.invoke(app, ["train", "--data", "earth:nowhere", "--out", str(run)])
    assert res.exit_code == 2 and "data" in res.output
    # the same folder with other data (or other options) is refused, not resumed; --overwrite replaces it
    other = ["train", "--data", "torus:3", "--out", str(run), "--objective", "psd", "--steps", "10", "--batch-size",
             "32", "--hidden", "16,16", "--no-progress"]  # fmt: skip
    res = runner.invoke(app, other)
    assert res.exit_code == 2 and "another run" in res.output and "torus:3" in res.output, res.output
    res = runner.invoke(app, [*other, "--overwrite"])
    assert res.exit_code == 0, res.output
    assert json.loads((run / "config.json").read_text())["data"] == "torus:3"
    res = runner.invoke(app, ["sample", "--run", str(run), "--out", str(tmp_path / "x.txt"), "--n", "5"])
    assert res.exit_code == 2 and ".pt" in res.output and not (tmp_path / "x.txt").exists(), res.output
    (run / "model.pt").write_bytes(b"not a torch file")  # corrupt weights: one clean line, exit 2
    res = runner.invoke(app, ["sample", "--run", str(run), "--out", str(tmp_path / "y.csv"), "--n", "5"])
    assert res.exit_code == 2 and "model.pt" in res.output and "weights_only" not in res.output, res.output
