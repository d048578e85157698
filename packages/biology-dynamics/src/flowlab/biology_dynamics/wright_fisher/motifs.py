"""Transcription-factor motifs from the JASPAR database bundled with `pyjaspar` (a local SQLite file, no network),
exact PWM scans, the per-window "oracle profile" of scan scores (and target profiles read from .npy / .pt files),
and the planted-motif conditional DNA task.

Scores are log-odds in bits, log2(p_b / background), with p the PFM column frequencies after a pseudocount; a
window's score is the sum over its columns. Scans score both strands: the forward window and its reverse complement
(A<->T, C<->G, reversed), keeping the larger, since a factor binds double-stranded DNA.
"""

from __future__ import annotations

import functools
import pickle
import re
import warnings
import zipfile
from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyjaspar
import torch

from flowlab.biology_dynamics.wright_fisher.dna import ALPHABET, check_letters

__all__ = [
    "DEFAULT_MOTIFS",
    "DEFAULT_RELEASE",
    "THRESHOLD_FRACTION",
    "Motif",
    "MotifTask",
    "check_profile",
    "default_threshold",
    "hit_rate",
    "load_motifs",
    "max_score",
    "motif_batch",
    "profile",
    "profile_mse",
    "pwm",
    "pwm_scan",
    "read_profile",
    "sample_motif_sequences",
]

DEFAULT_RELEASE = "JASPAR2024"
# Eight human CORE vertebrate matrices of width 7-10 with distinct consensus sites (JASPAR2024 and JASPAR2026):
# SP1 GC box, CREB1 CRE, MYC E-box, REL (NF-kB), CEBPA, FOXA1 forkhead, GATA2 (WGATAR), HNF4A.
DEFAULT_MOTIFS = (
    "MA0079.5",
    "MA0018.5",
    "MA0147.4",
    "MA0101.1",
    "MA0102.5",
    "MA0148.5",
    "MA0036.4",
    "MA0114.5",
)
THRESHOLD_FRACTION = 0.7
_MATRIX_ID = re.compile(r"^[A-Z]{2}\d{4}(\.\d+)?$")


@dataclass(frozen=True)
class Motif:
    """A JASPAR matrix: its id (e.g. MA0079.5), TF name and pfm: (w, 4) float64 site counts in ACGT order."""

    matrix_id: str
    name: str
    pfm: torch.Tensor = field(compare=False, repr=False)

    @property
    def width(self) -> int:
        """The motif width w (the rows of `pfm`)."""
        return self.pfm.shape[0]


def load_motifs(names_or_ids: Sequence[str], *, release: str = DEFAULT_RELEASE) -> list[Motif]:
    """Motifs by JASPAR matrix id (MA0079.5; a bare base id MA0079 takes the latest version) or by TF name, a name
    resolving among the CORE vertebrate matrices and having to name exactly one, from the bundled `release`."""
    if release not in pyjaspar.jaspar_releases:
        raise ValueError(f"release: expected one of {sorted(pyjaspar.jaspar_releases)}, got {release!r}")
    if isinstance(names_or_ids, str):
        raise ValueError(f"names_or_ids: expected a sequence of names or ids, got the string {names_or_ids!r}")
    return list(_fetch(tuple(names_or_ids), release))


@functools.lru_cache(maxsize=32)
def _fetch(names_or_ids: tuple[str, ...], release: str) -> tuple[Motif, ...]:
    """The motifs read from the bundled database, once per (keys, release): training draws a batch per step."""
    db = pyjaspar.jaspardb(release=release)
    motifs = []
    with warnings.catch_warnings(), closing(db.conn):
        warnings.filterwarnings("ignore", module="pyjaspar")  # an unknown id or name is reported below
        for key in names_or_ids:
            if _MATRIX_ID.match(key):
                found = db.fetch_motif_by_id(key)
                matches = [] if found is None else [found]
            else:
                matches = db.fetch_motifs(collection="CORE", tax_group="vertebrates", tf_name=key)
            if len(matches) != 1:
                listed = ", ".join(f"{m.matrix_id} {m.name}" for m in matches) or "none"
                raise ValueError(f"motif {key!r}: expected one {release} matrix, found {listed}; a matrix id is unique")
            (found,) = matches
            counts = torch.tensor([found.counts[letter] for letter in ALPHABET], dtype=torch.float64).T
            motifs.append(Motif(found.matrix_id, found.name, counts.contiguous()))
    return tuple(motifs)


def pwm(motif: Motif, *, pseudocount: float = 0.5, background: float = 0.25) -> torch.Tensor:
    """(w, 4) float64 log-odds in bits: log2((n_b + pseudocount) / (N + 4 pseudocount) / background) per column."""
    if pseudocount <= 0 or not 0 < background < 1:
        raise ValueError(f"pseudocount, background: expected > 0 and in (0, 1), got {pseudocount}, {background}")
    counts = motif.pfm + pseudocount
    return torch.log2(counts / counts.sum(-1, keepdim=True) / background)


def max_score(weights: torch.Tensor) -> float:
    """The largest score a window can reach under weights: (w, 4), the sum of the column maxima (the consensus)."""
    return float(weights.max(-1).values.sum())


def default_threshold(weights: torch.Tensor) -> float:
    """THRESHOLD_FRACTION (0.7) of `max_score(weights)`: a site counts as a hit when its score exceeds this."""
    return THRESHOLD_FRACTION * max_score(weights)


def pwm_scan(x: torch.Tensor, weights: torch.Tensor, *, both_strands: bool = True) -> torch.Tensor:
    """x: (B, L) int64, weights: (w, 4) log-odds -> (B, L - w + 1) float64 score of the window starting at each
    position: the forward strand, or with `both_strands` the max of it and the window's reverse complement."""
    check_letters(x)
    weights = _check_weights(weights, x.shape[1])
    windows = x.unfold(1, weights.shape[0], 1)  # (B, L - w + 1, w)
    columns = torch.arange(weights.shape[0])
    scores = weights[columns, windows].sum(-1)
    if both_strands:
        # the reverse complement of a window scored by W equals the window scored by W reversed in both axes
        scores = torch.maximum(scores, weights.flip(0, 1)[columns, windows].sum(-1))
    return scores


def profile(x: torch.Tensor, motifs: Sequence[Motif], *, window: int) -> torch.Tensor:
    """x: (B, L) int64 -> (B, n_motifs, L // window) float64, the oracle profile: per motif and non-overlapping
    window of `window` positions, the max two-strand scan score (default `pwm`) of the sites centred in the window
    (a site starting at i has centre i + w // 2; positions past the last whole window are dropped). `window` must be
    at least every motif's width and at most L, so that each window holds at least one centre."""
    check_letters(x)
    batch, length = x.shape
    if not motifs:
        raise ValueError("motifs: expected at least one motif")
    widest = max(m.width for m in motifs)
    if not widest <= window <= length:
        raise ValueError(f"window: expected between the widest motif ({widest}) and the length {length}, got {window}")
    windows = length // window
    rows = []
    for motif in motifs:
        centred = torch.full((batch, length), -torch.inf, dtype=torch.float64)
        centred[:, motif.width // 2 : length - motif.width + 1 + motif.width // 2] = pwm_scan(x, pwm(motif))
        rows.append(centred[:, : windows * window].reshape(batch, windows, window).amax(-1))
    return torch.stack(rows, 1)


def check_profile(p: object, n_motifs: int, windows: int) -> torch.Tensor:
    """p: (B, n_motifs, windows) finite float, else a ValueError naming the shape or the first NaN / inf entry."""
    if not isinstance(p, torch.Tensor) or not p.is_floating_point() or p.dim() != 3:
        raise ValueError(f"profile: expected a (B, {n_motifs}, {windows}) float tensor, got {p!r:.60}")
    if tuple(p.shape[1:]) != (n_motifs, windows):
        raise ValueError(f"profile: expected shape (B, {n_motifs}, {windows}), got {tuple(p.shape)}")
    bad = (~torch.isfinite(p)).nonzero()
    if len(bad):
        index = tuple(bad[0].tolist())
        raise ValueError(f"profile: {len(bad)} NaN or inf entries, the first at (b, motif, window) = {index}")
    return p


def profile_mse(x: torch.Tensor, motifs: Sequence[Motif], target: torch.Tensor, *, window: int) -> float:
    """Mean squared error between the oracle profile of x: (B, L) and target: (B, n_motifs, L // window)."""
    oracle = profile(x, motifs, window=window)
    check_profile(target, len(motifs), oracle.shape[2])
    if target.shape[0] != x.shape[0]:
        raise ValueError(f"profile: expected {x.shape[0]} profiles (one per sequence), got {target.shape[0]}")
    return float(((oracle - target.to(torch.float64)) ** 2).mean())


def read_profile(path: str | Path) -> torch.Tensor:
    """The tensor of target profiles in a .npy (`np.save`) or .pt (`torch.save` of one tensor) file, unchecked (see
    `check_profile`); a missing, unreadable or pickled file, or one holding something else, is a ValueError naming
    profile. A pickle's code never runs (numpy without pickles, torch with weights_only=True)."""
    path = Path(path)
    if path.suffix not in (".npy", ".pt"):
        raise ValueError(f"profile: expected a .npy or .pt file, got {path}")
    if not path.is_file():
        raise ValueError(f"profile: {path} not found")
    try:
        if path.suffix == ".npy":
            loaded = torch.from_numpy(np.load(path, allow_pickle=False))
        else:
            loaded = torch.load(path, map_location="cpu", weights_only=True)
    except (OSError, EOFError, ValueError, TypeError, RuntimeError, pickle.UnpicklingError, zipfile.BadZipFile) as err:
        what = f"{type(err).__name__}: empty, corrupt or pickled"  # not its message, which may advise unsafe loading
        raise ValueError(f"profile: {path} holds no plain numeric array ({what})") from None
    if not isinstance(loaded, torch.Tensor):
        raise ValueError(f"profile: {path} holds a {type(loaded).__name__}, expected one (n, motifs, windows) tensor")
    return loaded


@dataclass(frozen=True)
class MotifTask:
    """Class-conditional DNA: a sequence of class c is a uniform i.i.d. background of `length` letters with
    `min_copies`-`max_copies` non-overlapping sites of motif c (the c-th of `motifs`) planted at random positions."""

    length: int = 100
    classes: int = 2
    min_copies: int = 1
    max_copies: int = 3
    seed: int = 0
    motifs: tuple[str, ...] = DEFAULT_MOTIFS
    release: str = DEFAULT_RELEASE


def sample_motif_sequences(
    task: MotifTask, n: int, *, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """-> x: (n, length) int64 and labels: (n,) int64 uniform over the classes; the planted sites are drawn letter
    by letter from the PFM column frequencies. Deterministic given `generator` (default: seeded with task.seed)."""
    if not 1 <= task.classes <= len(task.motifs):
        raise ValueError(f"classes: expected between 1 and {len(task.motifs)} (the motifs given), got {task.classes}")
    if not 1 <= task.min_copies <= task.max_copies:
        raise ValueError(f"min_copies, max_copies: expected 1 <= min <= max, got {task.min_copies}, {task.max_copies}")
    motifs = load_motifs(task.motifs[: task.classes], release=task.release)
    widest = max(m.width for m in motifs)
    if task.max_copies * widest > task.length:
        raise ValueError(f"length: {task.max_copies} sites of width {widest} do not fit in {task.length} letters")
    if generator is None:
        generator = torch.Generator().manual_seed(task.seed)
    x = torch.randint(len(ALPHABET), (n, task.length), generator=generator)
    labels = torch.randint(task.classes, (n,), generator=generator)
    copies = torch.randint(task.min_copies, task.max_copies + 1, (n,), generator=generator)
    for c, motif in enumerate(motifs):
        for k in range(task.min_copies, task.max_copies + 1):
            rows = ((labels == c) & (copies == k)).nonzero().squeeze(1)
            if len(rows):
                _plant(x, rows, motif, k, generator)
    return x, labels


def motif_batch(task: MotifTask, n: int, *, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """A fresh training draw of `sample_motif_sequences` (x (n, L), labels (n,) int64, on the CPU), seeded from
    `generator` on any device."""
    seed = int(torch.randint(2**62, (1,), generator=generator, device=generator.device))
    return sample_motif_sequences(task, n, generator=torch.Generator().manual_seed(seed))


def _plant(x: torch.Tensor, rows: torch.Tensor, motif: Motif, k: int, generator: torch.Generator) -> None:
    """Overwrite k non-overlapping sites of motif in each of x[rows], uniformly over all such placements: k sorted
    distinct slots u_0 < ... < u_{k-1} among the L - k w + k of them give the starts u_j + j (w - 1)."""
    w, length = motif.width, x.shape[1]
    slots = torch.rand(len(rows), length - k * w + k, generator=generator).argsort(-1)[:, :k].sort(-1).values
    starts = slots + torch.arange(k) * (w - 1)  # (m, k)
    freqs = motif.pfm / motif.pfm.sum(-1, keepdim=True)
    letters = torch.multinomial(freqs, len(rows) * k, replacement=True, generator=generator)  # (w, m k)
    positions = starts[..., None] + torch.arange(w)  # (m, k, w)
    x[rows[:, None, None], positions] = letters.T.reshape(len(rows), k, w)


def hit_rate(
    x: torch.Tensor,
    labels: torch.Tensor,
    motifs: Sequence[Motif],
    *,
    threshold: float | Sequence[float] | None = None,
) -> float:
    """Share of the sequences x: (B, L) whose best two-strand site of their class motif, motifs[labels: (B,)],
    scores above the threshold (one for all, one per motif, or by default `default_threshold` per motif)."""
    check_letters(x)
    if not isinstance(labels, torch.Tensor) or labels.shape != (x.shape[0],) or labels.dtype != torch.int64:
        raise ValueError(f"labels: expected a ({x.shape[0]},) int64 tensor, got {labels!r:.60}")
    if len(labels) and not 0 <= int(labels.min()) <= int(labels.max()) < len(motifs):
        raise ValueError(
            f"labels: expected classes in [0, {len(motifs)}), got [{int(labels.min())}, {int(labels.max())}]"
        )
    weights = [pwm(m) for m in motifs]
    if threshold is None:
        thresholds = [default_threshold(w) for w in weights]
    elif isinstance(threshold, Sequence):
        if len(threshold) != len(motifs):
            raise ValueError(f"threshold: expected one per motif ({len(motifs)}), got {len(threshold)}")
        thresholds = list(threshold)
    else:
        thresholds = [threshold] * len(motifs)
    hits = torch.zeros(x.shape[0], dtype=torch.bool)
    for c, (w, t) in enumerate(zip(weights, thresholds)):
        rows = labels == c
        if rows.any():
            hits[rows] = pwm_scan(x[rows], w).amax(-1) > t
    return float(hits.float().mean())


def _check_weights(weights: object, length: int) -> torch.Tensor:
    """weights: (w, 4) finite float with 1 <= w <= length, as float64."""
    if not isinstance(weights, torch.Tensor) or not weights.is_floating_point() or weights.dim() != 2:
        raise ValueError(f"pwm: expected a (w, {len(ALPHABET)}) float tensor, got {weights!r:.60}")
    if weights.shape[1] != len(ALPHABET) or not 1 <= weights.shape[0] <= length:
        raise ValueError(
            f"pwm: expected shape (w, {len(ALPHABET)}) with 1 <= w <= {length}, got {tuple(weights.shape)}"
        )
    if not torch.isfinite(weights).all():
        raise ValueError("pwm: contains NaN or inf")
    return weights.to(torch.float64)
