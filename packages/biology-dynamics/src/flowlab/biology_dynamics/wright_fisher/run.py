"""A trained sequence model on disk: `DNARun` names the task, the domain and the network; `train_run` trains it with
checkpoints (a rerun resumes), `load_run` rebuilds it from the folder, and `evaluate_run` scores it.

Tasks: "toy-simplex" (independent positions over `letters` letters, one seeded Dirichlet(0.5) categorical) and
"markov" (a seeded first-order chain), both on a `SequenceMLP` (hollow for the simplicial domain), and "motifs"
(DNA with `classes` JASPAR motifs planted in uniform backgrounds; a `SequenceCNN` conditioned on the class or, with
`condition="profile"`, on each sequence's oracle profile: the windowed PWM-scan scores of the class motifs).
Domains: the three of the paper, MDLM, "unified" (one time-free sufficient-statistic network trained on all three; it
samples and scores in any of them) and the simplex baselines "dirichlet-fm", "linear-fm" and "ddsm-lite".
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
from flowlab.biology_dynamics.wright_fisher.motifs import (
    Motif,
    MotifTask,
    check_profile,
    hit_rate,
    load_motifs,
    motif_batch,
    profile_mse,
)
from flowlab.biology_dynamics.wright_fisher.motifs import profile as oracle_profile
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
    "class_profile_mse",
    "evaluate_run",
    "load_run",
    "method_of",
    "motif_profiles",
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
    """`task` "toy-simplex" or "markov" (`letters` letters) or "motifs" (4 letters, `classes` motif classes,
    conditioned on the class or, `condition="profile"`, on the oracle profile over windows of `window` letters);
    sequences of `length`; `domain`; `steps` Adam steps of `batch` sequences at `lr`; network `width` (MLP hidden
    size or CNN channels) and CNN `stacks`; `seed` for the target, the data and the training."""

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
    condition: Literal["class", "profile"] = "class"
    window: int = 20

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.task == "motifs" and self.letters != 4:
            raise ValueError(f"letters: the motifs task is DNA (4 letters), got {self.letters}")
        if self.condition == "profile" and self.task != "motifs":
            raise ValueError(f"condition: only the motifs task has profiles, this run's task is {self.task!r}")
        for name in ("letters", "length", "steps", "batch", "width", "stacks", "classes", "window"):
            least = 2 if name == "letters" else 1
            if getattr(self, name) < least:
                raise ValueError(f"{name}: expected an int >= {least}, got {getattr(self, name)}")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"lr: expected a finite learning rate > 0, got {self.lr}")


def training_loss(run: DNARun) -> Any:
    """The run's `loss_fn` for `core.train.fit` (a unified run: `UnifiedLoss` over the three domains)."""
    if run.domain == "unified":
        return UnifiedLoss(run.letters)
    return method_of(run).loss_fn


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
        return DDSMLite(run.letters, tau_min=0.02 / run.letters, seed=run.seed)  # its bank: the same when resumed
    if run.domain in BASELINES:
        return BASELINES[run.domain](run.letters)
    return domain(run.domain, run.letters)


def network(run: DNARun) -> torch.nn.Module:
    """The run's denoiser: a `SequenceMLP` (toy tasks; hollow for the simplicial domain) or a class- or
    profile-conditional `SequenceCNN` (motifs); time-free for the unified model, with a mask channel for MDLM."""
    channels = run.letters + (run.domain == "masked")
    times = run.domain != "unified"
    if run.task != "motifs":
        net = SequenceMLP(run.length, run.letters, channels=channels, hidden=(run.width,) * 2, times=times)
        return Hollow(net) if run.domain == "simplicial" else net
    if run.condition == "profile":
        return SequenceCNN(run.letters, channels=channels, width=run.width, stacks=run.stacks, times=times,
                           profile_motifs=run.classes, window=run.window)  # fmt: skip
    return SequenceCNN(
        run.letters, channels=channels, width=run.width, stacks=run.stacks, times=times, classes=run.classes
    )


def _task(run: DNARun) -> MotifTask:
    return MotifTask(length=run.length, classes=run.classes, seed=run.seed)


def _motifs(run: DNARun) -> list[Motif]:
    """The run's class motifs: the profile's rows, in class order."""
    return load_motifs(_task(run).motifs[: run.classes])


def motif_profiles(run: DNARun, x: torch.Tensor) -> torch.Tensor:
    """x: (B, L) int64 -> (B, classes, L // window) float64 oracle profiles of the run's class motifs."""
    return oracle_profile(x.cpu(), _motifs(run), window=run.window)


def _condition(run: DNARun, x: torch.Tensor, labels: torch.Tensor, device) -> dict[str, torch.Tensor]:
    """The network's condition for motif sequences x: (B, L) of classes labels: (B,): {"cond": labels} or
    {"cond": (B, classes, windows) float32 oracle profiles}, on `device`."""
    if run.condition == "profile":
        return {"cond": motif_profiles(run, x).float().to(device)}
    return {"cond": labels.to(device)}


@functools.lru_cache(maxsize=16)
def _toy_target(task: str, letters: int, seed: int) -> Any:
    """The toy task's target, built once per setting (not on every batch)."""
    return categorical_target(letters, seed=seed) if task == "toy-simplex" else markov_target(letters, seed=seed)


def training_batch(run: DNARun, n: int, generator: torch.Generator, device="cpu") -> Any:
    """n fresh training sequences on `device`: (n, L) int64 (toy tasks) or (x_0, {"cond": labels (n,)}) (motifs; with
    `condition="profile"` the cond is each sequence's oracle profile (n, classes, L // window))."""
    if run.task == "toy-simplex":
        probs = _toy_target(run.task, run.letters, run.seed)
        return sample_categorical(probs, n, run.length, generator=generator).to(device)
    if run.task == "markov":
        return _toy_target(run.task, run.letters, run.seed).sample(n, run.length, generator=generator).to(device)
    x, labels = motif_batch(_task(run), n, generator=generator)
    return x.to(device), _condition(run, x, labels, device)


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
    probe = training_batch(run, 1, torch.Generator(device).manual_seed(run.seed), device)  # motifs that do not fit
    if run.task == "motifs":
        motif_profiles(run, probe[0])  # a window that does not fit the motifs or the length
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
    fit(net, training_loss(run), data, steps=run.steps, optimizer=torch.optim.Adam(net.parameters(), run.lr),
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
    (toy-simplex), adjacent-pair KL (markov) or motif scores (motifs, `_motif_scores`)."""
    if not (isinstance(n, int) and n >= 1 and isinstance(steps, int) and steps >= 1):
        raise ValueError(f"n, steps: expected ints >= 1, got {n!r}, {steps!r}")
    method = method_of(run, sample_domain)
    generator = torch.Generator(device).manual_seed(seed)
    if run.task == "motifs":
        return _motif_scores(run, net, method, n, steps, generator, device)
    x_0 = training_batch(run, n, generator, device)
    out = {}
    if hasattr(method, "elbo"):
        out["nats"] = method.elbo(net, x_0, generator=generator)["nats"]
    x = method.sample(net, n, run.length, steps=steps, generator=generator, device=device).cpu()
    if run.task == "toy-simplex":
        probs = _toy_target(run.task, run.letters, run.seed)
        out["exact_nll"] = float(-probs.log()[x_0.cpu()].mean())
        out["kl"] = empirical_kl(x, probs)
    else:
        chain = _toy_target(run.task, run.letters, run.seed)
        out["exact_nll"] = float(chain.nll(x_0).mean())
        out["kl"] = pair_kl(x, chain)
    return out


def _motif_scores(
    run: DNARun, net: torch.nn.Module, method: Any, n: int, steps: int, generator: torch.Generator, device
) -> dict[str, float]:
    """On n held-out motif sequences (x_0, labels) with oracle profiles (the targets): the ELBO `nats` (likelihood
    domains), then n samples, of balanced classes (class runs) or conditioned on the targets (profile runs), and
    - `hit_rate`: the share of samples whose class motif (the target's class for profile runs) has a hit;
    - `profile_mse`: the per-sequence squared error of a sample's oracle profile against its target; a class run's
      samples do not depend on a target beyond its class, so each target is scored against all samples of its class;
    - `data_profile_mse`: the same for held-out data, each target against the other held-out sequences of its
      class: what an exact class-conditional model scores (an exact profile-conditional one scores 0)."""
    x_0, labels = motif_batch(_task(run), n, generator=generator)
    cond = _condition(run, x_0, labels, device)
    out = {}
    if hasattr(method, "elbo"):
        out["nats"] = method.elbo(net, x_0.to(device), generator=generator, cond=cond)["nats"]
    sample_labels = labels if run.condition == "profile" else torch.arange(n) % run.classes
    sample_cond = cond if run.condition == "profile" else {"cond": sample_labels.to(device)}
    x = method.sample(net, n, run.length, steps=steps, generator=generator, device=device, cond=sample_cond).cpu()
    motifs, targets = _motifs(run), motif_profiles(run, x_0)
    out["hit_rate"] = hit_rate(x, sample_labels, motifs)
    if run.condition == "profile":
        out["profile_mse"] = profile_mse(x, motifs, targets, window=run.window)
    else:
        out["profile_mse"] = class_profile_mse(motif_profiles(run, x), sample_labels, targets, labels)
    out["data_profile_mse"] = class_profile_mse(targets, labels, targets, labels, distinct=True)
    return out


def class_profile_mse(
    p: torch.Tensor, p_labels: torch.Tensor, targets: torch.Tensor, labels: torch.Tensor, *, distinct: bool = False
) -> float:
    """The per-sequence profile error of class-conditional draws p: (n, M, W) of classes p_labels: (n,) against
    targets: (m, M, W) of classes labels: (m,): the squared error averaged over windows and every same-class pair
    (p_i, target_j), and over the targets (each class weighted by its targets). With `distinct`, p is targets and a
    sequence is not paired with itself. NaN when no target has a same-class partner."""
    total, weight = 0.0, 0
    for c in labels.unique().tolist():
        a, b = p[p_labels == c].flatten(1).double(), targets[labels == c].flatten(1).double()
        pairs = len(a) * len(b) - (len(b) if distinct else 0)
        if pairs == 0:
            continue
        # sum over all pairs of |a_i - b_j|^2 (the diagonal pairs of `distinct` add 0)
        summed = len(b) * (a**2).sum() + len(a) * (b**2).sum() - 2 * a.sum(0) @ b.sum(0)
        total += len(b) * float(summed) / pairs / a.shape[1]
        weight += len(b)
    return total / weight if weight else float("nan")


def sample_run(run: DNARun, net: torch.nn.Module, n: int | None = None, *, steps: int = 100,
               label: int | None = None, profile: torch.Tensor | None = None, sample_domain: str | None = None,
               device="cpu", seed: int = 0) -> torch.Tensor:  # fmt: skip
    """n sampled sequences (n, L) int64. Motifs: a class-conditional run samples class `label` (default balanced
    over the classes), a profile-conditional one a sequence per target profile: (n, classes, L // window) oracle
    scores in bits (see `motif_profiles`). n defaults to one per profile, else 100."""
    if profile is not None:
        _check_targets(run, profile)
    n = (100 if profile is None else len(profile)) if n is None else n
    if not (isinstance(n, int) and n >= 1 and isinstance(steps, int) and steps >= 1):
        raise ValueError(f"n, steps: expected ints >= 1, got {n!r}, {steps!r}")
    method = method_of(run, sample_domain)
    cond = _sample_condition(run, n, label, profile)
    generator = torch.Generator(device).manual_seed(seed)
    cond = None if cond is None else {"cond": cond.to(device)}
    return method.sample(net, n, run.length, steps=steps, generator=generator, device=device, cond=cond).cpu()


def _sample_condition(run: DNARun, n: int, label: int | None, profile: torch.Tensor | None) -> torch.Tensor | None:
    """The network's condition of n samples: None (toy tasks), (n,) int64 labels (class `label`, default balanced)
    or the (n, classes, windows) target profiles as float32 (profile-conditional runs)."""
    if label is not None and run.task != "motifs":
        raise ValueError(f"label: only the motifs task is class-conditional, this run's task is {run.task!r}")
    if run.task != "motifs":
        return None
    if run.condition == "class":
        if label is not None and not 0 <= label < run.classes:
            raise ValueError(f"label: expected a class in [0, {run.classes}), got {label}")
        return torch.full((n,), label) if label is not None else torch.arange(n) % run.classes
    if label is not None:
        raise ValueError("label: this run is profile-conditional (--condition profile); give target profiles instead")
    if profile is None:
        windows = run.length // run.window
        raise ValueError(f"profile: this run is profile-conditional; expected ({n}, {run.classes}, {windows}) target "
                         "profiles (oracle scores per motif and window)")  # fmt: skip
    if len(profile) != n:
        raise ValueError(f"n, profile: expected one target profile per sequence, got {len(profile)} for n = {n}")
    return profile.float()


def _check_targets(run: DNARun, profile: object) -> torch.Tensor:
    """profile: (n, classes, L // window) finite float target profiles of a profile-conditional run."""
    if run.condition != "profile":
        what = f"task is {run.task!r}" if run.task != "motifs" else "motif run is class-conditional"
        raise ValueError(f"profile: only a profile-conditional run (--condition profile) takes profiles; this {what}")
    return check_profile(profile, run.classes, run.length // run.window)
