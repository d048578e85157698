"""A trained sequence model on disk: `DNARun` names the task, the domain and the network; `train_run` trains it with
checkpoints (a rerun resumes), `load_run` rebuilds it from the folder, and `evaluate_run` scores it.

Tasks: "toy-simplex" (independent positions over `letters` letters, one seeded Dirichlet(0.5) categorical) and
"markov" (a seeded first-order chain), both on a `SequenceMLP` (hollow for the simplicial domain), and "motifs"
(class-conditional DNA with `classes` JASPAR motifs planted in uniform backgrounds; a class-conditional
`SequenceCNN`). Domains: the three of the paper, MDLM, "unified" (one
time-free sufficient-statistic network trained on all three; it samples and scores in any of them) and the simplex
baselines "dirichlet-fm", "linear-fm" and "ddsm-lite".
"""

from __future__ import annotations

import functools
import json
import math
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import torch

from flowlab.biology_dynamics.wright_fisher.baselines import DDSMLite, DirichletFM, LinearSimplexFM
from flowlab.biology_dynamics.wright_fisher.discrete import DiscreteDomain
from flowlab.biology_dynamics.wright_fisher.hollow import Hollow
from flowlab.biology_dynamics.wright_fisher.motifs import MotifTask, hit_rate, load_motifs, motif_batch
from flowlab.biology_dynamics.wright_fisher.nets import SequenceCNN, SequenceMLP
from flowlab.biology_dynamics.wright_fisher.toy import (
    categorical_target,
    empirical_kl,
    markov_target,
    pair_kl,
    sample_categorical,
)
from flowlab.biology_dynamics.wright_fisher.unified import DOMAINS, UnifiedLoss, domain
from flowlab.core.config import Config
from flowlab.core.nets import seeded_init
from flowlab.core.train import fit, latest_checkpoint, load_checkpoint
from flowlab.core.validation import check_device

__all__ = [
    "DNARun",
    "evaluate_run",
    "load_run",
    "method_of",
    "network",
    "sample_run",
    "train_run",
    "training_batch",
    "training_loss",
]

SETTINGS = "run.json"
Domain = Literal["simplicial", "discrete", "gaussian", "masked", "unified", "dirichlet-fm", "linear-fm", "ddsm-lite"]
BASELINES = {"dirichlet-fm": DirichletFM, "linear-fm": LinearSimplexFM, "ddsm-lite": DDSMLite}


@dataclass(frozen=True)
class DNARun(Config):
    """`task` "toy-simplex" or "markov" (`letters` letters) or "motifs" (4 letters, `classes` motif classes);
    sequences of `length`;
    `domain`; `steps` Adam steps of `batch` sequences at `lr`; network `width` (MLP hidden size or CNN channels)
    and CNN `stacks`; `seed` for the target, the data and the training."""

    task: Literal["toy-simplex", "markov", "motifs"] = "motifs"
    domain: Domain = "simplicial"
    letters: int = 4
    length: int = 100
    classes: int = 2
    steps: int = 2000
    batch: int = 64
    lr: float = 2e-3
    width: int = 64
    stacks: int = 1
    seed: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.task == "motifs" and self.letters != 4:
            raise ValueError(f"letters: the motifs task is DNA (4 letters), got {self.letters}")
        for name in ("letters", "length", "steps", "batch", "width", "stacks", "classes"):
            least = 2 if name == "letters" else 1
            if getattr(self, name) < least:
                raise ValueError(f"{name}: expected an int >= {least}, got {getattr(self, name)}")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"lr: expected a finite learning rate > 0, got {self.lr}")


def training_loss(run: DNARun, generator: torch.Generator | None = None) -> Any:
    """The run's `loss_fn` for `core.train.fit` (a unified run: `UnifiedLoss` over the three domains). With
    `generator`, a DDSM-lite run draws its bank from it now instead of at its first loss call, so that a resumed run
    (whose generator the checkpoint then restores) trains on the bank of the uninterrupted one."""
    if run.domain == "unified":
        return UnifiedLoss(run.letters)
    method = method_of(run)
    if generator is not None and isinstance(method, DDSMLite):
        method.build(generator=generator)
    return method.loss_fn


def method_of(run: DNARun, sample_domain: str | None = None) -> Any:
    """The domain object that samples and scores the run: a unified run in `sample_domain` (default simplicial),
    a single-domain run only in its own."""
    if run.domain == "unified":
        sample_domain = sample_domain or "simplicial"
        if sample_domain not in DOMAINS:
            raise ValueError(f"domain: a unified run samples in one of {DOMAINS}, got {sample_domain!r}")
        return domain(sample_domain, run.letters, ssp=True)
    if sample_domain not in (None, run.domain):
        raise ValueError(f"domain: this run was trained for {run.domain!r}, not {sample_domain!r}")
    if run.domain == "masked":
        return DiscreteDomain(run.letters, kind="masked")
    if run.domain == "ddsm-lite":  # DDSM's own smallest time: t = 0.01 in its speed-balanced clock, tau = 2 t / K
        return DDSMLite(run.letters, tau_min=0.02 / run.letters)
    if run.domain in BASELINES:
        return BASELINES[run.domain](run.letters)
    return domain(run.domain, run.letters)


def network(run: DNARun) -> torch.nn.Module:
    """The run's denoiser: a `SequenceMLP` (toy tasks; hollow for the simplicial domain) or a class-conditional
    `SequenceCNN` (motifs); time-free for the unified model, with a mask channel for MDLM."""
    channels = run.letters + (run.domain == "masked")
    times = run.domain != "unified"
    if run.task != "motifs":
        net = SequenceMLP(run.length, run.letters, channels=channels, hidden=(run.width,) * 2, times=times)
        return Hollow(net) if run.domain == "simplicial" else net
    return SequenceCNN(
        run.letters, channels=channels, width=run.width, stacks=run.stacks, times=times, classes=run.classes
    )


def _task(run: DNARun) -> MotifTask:
    return MotifTask(length=run.length, classes=run.classes, seed=run.seed)


@functools.lru_cache(maxsize=16)
def _toy_target(task: str, letters: int, seed: int) -> Any:
    """The toy task's target, built once per setting (not on every batch)."""
    return categorical_target(letters, seed=seed) if task == "toy-simplex" else markov_target(letters, seed=seed)


def training_batch(run: DNARun, n: int, generator: torch.Generator, device="cpu") -> Any:
    """n fresh training sequences on `device`: (n, L) int64 (toy tasks) or (x_0, {"cond": labels (n,)}) (motifs)."""
    if run.task == "toy-simplex":
        probs = _toy_target(run.task, run.letters, run.seed)
        return sample_categorical(probs, n, run.length, generator=generator).to(device)
    if run.task == "markov":
        return _toy_target(run.task, run.letters, run.seed).sample(n, run.length, generator=generator).to(device)
    x, labels = motif_batch(_task(run), n, generator=generator)
    return x.to(device), {"cond": labels.to(device)}


def _settings(folder: Path, name: str) -> DNARun:
    """The settings in `folder`'s run.json; one that is not a `train_run`'s is a ValueError naming `name`."""
    try:
        return DNARun.from_mapping(json.loads((folder / SETTINGS).read_text()))
    except ValueError as err:  # not JSON (or not text), or not a DNARun's settings
        raise ValueError(
            f"{name}: {folder / SETTINGS} is not the {SETTINGS} of a `flowlab dna train` run ({err})"
        ) from None


def train_run(
    run: DNARun,
    out: str | Path,
    *,
    device="cpu",
    progress: bool = True,
    ckpt_every: int = 500,
    resume: bool = False,
    overwrite: bool = False,
) -> Path:
    """Train `run` into the folder `out` (checkpoints there) -> out. A folder holding this run's checkpoints is
    continued with resume=True (`run.steps` may grow) and started again with overwrite=True, and refused without
    either; one holding another run is replaced with overwrite=True only. The settings are checked (the task draws
    one batch) before anything is written; the network takes its initial weights from `run.seed`."""
    if resume and overwrite:
        raise ValueError("out: give --resume (continue the run) or --overwrite (start again), not both")
    device = check_device(device)
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"out: {out} is a file; expected a run folder")
    training_batch(run, 1, torch.Generator(device).manual_seed(run.seed), device)  # e.g. motifs that do not fit
    with seeded_init(run.seed):
        net = network(run)
    settings, last = out / SETTINGS, latest_checkpoint(out)
    if last is not None:
        if not settings.is_file():
            raise ValueError(f"out: {out} holds checkpoints but no {SETTINGS}; choose another folder")
        same = replace(_settings(out, "out"), steps=run.steps) == run
        if overwrite:
            shutil.rmtree(out)
        elif not same:
            raise ValueError(f"out: {out} holds a run with other settings ({settings}); only --steps may change "
                             "with --resume; pass --overwrite to replace it or choose another folder")  # fmt: skip
        elif not resume:
            raise ValueError(f"out: {out} holds this run already; pass --resume to continue it from its last "
                             "checkpoint (--steps may grow), or --overwrite to start it again")  # fmt: skip
        else:
            done = int(last.name.removeprefix("step-"))
            if run.steps < done:
                raise ValueError(f"steps: {out} is trained to step {done} already; expected --steps >= {done}")
    elif out.is_dir() and any(p.name != SETTINGS for p in out.iterdir()):
        raise ValueError(f"out: {out} is not empty and holds no run; choose another folder or empty it")
    out.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps(run.to_dict(), indent=1))
    data = lambda step, gen: training_batch(run, run.batch, gen, device)  # noqa: E731
    generator = torch.Generator(device).manual_seed(run.seed)
    fit(net, training_loss(run, generator), data, steps=run.steps, optimizer=torch.optim.Adam(net.parameters(), run.lr),
        device=device, generator=generator, ckpt_dir=out, ckpt_every=ckpt_every, progress=progress,
        config=run.to_dict())  # fmt: skip
    return out


def load_run(folder: str | Path, *, device="cpu") -> tuple[DNARun, torch.nn.Module]:
    """(the run's settings, its network with the latest checkpoint's weights) from a `train_run` folder."""
    device, folder = check_device(device), Path(folder)
    if not (folder / SETTINGS).is_file():
        raise ValueError(f"folder: {folder} is not a run folder (no {SETTINGS}); train one with `flowlab dna train`")
    run = _settings(folder, "folder")
    net = network(run).to(device)
    try:
        load_checkpoint(folder, model=net, device=device, restore_rng=False)
    except FileNotFoundError as err:
        raise ValueError(f"folder: {folder} holds no checkpoint yet (train it first): {err}") from err
    except ValueError as err:  # a corrupt checkpoint, or the weights of another network
        raise ValueError(f"folder: {str(err).removeprefix('path: ')} (the network its {SETTINGS} describes)") from None
    return run, net.eval()


def evaluate_run(
    run: DNARun, net: torch.nn.Module, *, n: int = 1000, steps: int = 100, sample_domain: str | None = None,
    device="cpu", seed: int = 1,
) -> dict[str, float]:  # fmt: skip
    """Score a trained run on fresh data drawn with `seed`: the negative ELBO in nats per position (likelihood
    domains) beside the data's exact NLL (toy tasks), then `n` samples with `steps` steps: their letter KL
    (toy-simplex), adjacent-pair KL (markov) or motif hit rate (motifs)."""
    if not (isinstance(n, int) and n >= 1 and isinstance(steps, int) and steps >= 1):
        raise ValueError(f"n, steps: expected ints >= 1, got {n!r}, {steps!r}")
    method = method_of(run, sample_domain)
    generator = torch.Generator(device).manual_seed(seed)
    held = training_batch(run, n, generator, device)
    x_0, cond = held if isinstance(held, tuple) else (held, None)
    out = {}
    if hasattr(method, "elbo"):
        out["nats"] = method.elbo(net, x_0, generator=generator, cond=cond)["nats"]
    labels = torch.arange(n) % run.classes
    sample_cond = {"cond": labels.to(device)} if run.task == "motifs" else None
    x = method.sample(net, n, run.length, steps=steps, generator=generator, device=device, cond=sample_cond).cpu()
    if run.task == "toy-simplex":
        probs = _toy_target(run.task, run.letters, run.seed)
        out["exact_nll"] = float(-probs.log()[x_0.cpu()].mean())
        out["kl"] = empirical_kl(x, probs)
    elif run.task == "markov":
        chain = _toy_target(run.task, run.letters, run.seed)
        out["exact_nll"] = float(chain.nll(x_0).mean())
        out["kl"] = pair_kl(x, chain)
    else:
        out["hit_rate"] = hit_rate(x, labels, load_motifs(_task(run).motifs[: run.classes]))
    return out


def sample_run(run: DNARun, net: torch.nn.Module, n: int, *, steps: int = 100, label: int | None = None,
               sample_domain: str | None = None, device="cpu", seed: int = 0) -> torch.Tensor:  # fmt: skip
    """n sampled sequences (n, L) int64 (motifs: of class `label`, default balanced over the classes)."""
    if not (isinstance(n, int) and n >= 1 and isinstance(steps, int) and steps >= 1):
        raise ValueError(f"n, steps: expected ints >= 1, got {n!r}, {steps!r}")
    if label is not None and run.task != "motifs":
        raise ValueError(f"label: only the motifs task is class-conditional, this run's task is {run.task!r}")
    method = method_of(run, sample_domain)
    cond = None
    if run.task == "motifs":
        if label is not None and not 0 <= label < run.classes:
            raise ValueError(f"label: expected a class in [0, {run.classes}), got {label}")
        labels = torch.full((n,), label) if label is not None else torch.arange(n) % run.classes
        cond = {"cond": labels.to(device)}
    generator = torch.Generator(device).manual_seed(seed)
    return method.sample(net, n, run.length, steps=steps, generator=generator, device=device, cond=cond).cpu()
