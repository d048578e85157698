"""DNA sequences as letter indices: `encode` / `decode` between strings over ACGT and (B, L) int64 tensors (A=0,
C=1, G=2, T=3, so the complement of letter b is 3 - b), `one_hot`, and plain FASTA reading and writing.

Inputs are validated: a letter outside ACGT (N included), sequences of unequal length or of a length other than the
one asked for raise a ValueError naming the sequence, the position and the letter.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

__all__ = ["ALPHABET", "check_letters", "decode", "encode", "one_hot", "read_fasta", "write_fasta"]

ALPHABET = "ACGT"

_INVALID = re.compile(r"[^ACGTacgt]")
_CODES = np.full(256, -1, dtype=np.int64)
for _code, _letter in enumerate(ALPHABET):
    _CODES[ord(_letter)] = _CODES[ord(_letter.lower())] = _code


def encode(seqs: Sequence[str], *, length: int | None = None) -> torch.Tensor:
    """seqs: B strings over ACGT (either case), all of one length L (`length` when given) -> (B, L) int64."""
    if isinstance(seqs, str) or not isinstance(seqs, Sequence) or len(seqs) == 0:
        raise ValueError(f"seqs: expected a non-empty sequence of strings, got {seqs!r:.60}")
    expected = len(seqs[0]) if length is None else length
    for i, seq in enumerate(seqs):
        if not isinstance(seq, str):
            raise ValueError(f"seqs: sequence {i} is not a string: {seq!r:.60}")
        if len(seq) != expected:
            source = f"length={length}" if length is not None else "the length of sequence 0"
            raise ValueError(f"seqs: sequence {i} has length {len(seq)}, expected {expected} ({source})")
        bad = _INVALID.search(seq)
        if bad is not None:
            raise ValueError(
                f"seqs: sequence {i} has the letter {bad.group()!r} at position {bad.start()}, "
                f"outside the alphabet {ALPHABET}"
            )
    codes = _CODES[np.frombuffer("".join(seqs).encode("ascii"), dtype=np.uint8)]
    return torch.from_numpy(codes.reshape(len(seqs), expected).copy())


def check_letters(x: object, letters: int = len(ALPHABET)) -> torch.Tensor:
    """x: (B, L) int64 with entries in [0, letters), else a ValueError."""
    if not isinstance(x, torch.Tensor) or x.dtype != torch.int64 or x.dim() != 2:
        raise ValueError(f"x: expected a (B, L) int64 tensor of letter indices, got {x!r:.60}")
    if x.numel() and (int(x.min()) < 0 or int(x.max()) >= letters):
        raise ValueError(f"x: letter indices must lie in [0, {letters}), got [{int(x.min())}, {int(x.max())}]")
    return x


def decode(x: torch.Tensor) -> list[str]:
    """x: (B, L) int64 letter indices -> B strings over ACGT (upper case)."""
    check_letters(x)
    letters = np.frombuffer(ALPHABET.encode("ascii"), dtype=np.uint8)[x.cpu().numpy()]
    return [row.tobytes().decode("ascii") for row in letters]


def one_hot(x: torch.Tensor, letters: int = len(ALPHABET)) -> torch.Tensor:
    """x: (B, L) int64 -> (B, L, letters) in the default float dtype."""
    check_letters(x, letters)
    return torch.nn.functional.one_hot(x, letters).to(torch.get_default_dtype())


def write_fasta(path: str | Path, seqs: Sequence[str], names: Sequence[str] | None = None, *, width: int = 80) -> None:
    """Write B records (`names` default to seq0, seq1, ...), the sequence wrapped at `width` letters a line."""
    names = [f"seq{i}" for i in range(len(seqs))] if names is None else list(names)
    if len(names) != len(seqs):
        raise ValueError(f"names: expected {len(seqs)} names (one per sequence), got {len(names)}")
    if width < 1:
        raise ValueError(f"width: expected a positive line width, got {width}")
    lines = []
    for i, (name, seq) in enumerate(zip(names, seqs)):
        if not name or "\n" in name or "\r" in name:
            raise ValueError(f"names: name {i} must be a non-empty single line, got {name!r:.60}")
        if not seq or re.search(r"[\s>]", seq):
            raise ValueError(f"seqs: sequence {i} must be non-empty without whitespace or '>', got {seq!r:.60}")
        lines.append(f">{name}")
        lines.extend(seq[start : start + width] for start in range(0, len(seq), width))
    Path(path).write_text("\n".join(lines) + "\n")


def read_fasta(path: str | Path) -> list[tuple[str, str]]:
    """Records (name, sequence) of a FASTA file, a sequence joined from all its lines; blank lines are skipped.

    A file without a '>' header, text before the first header or a header without a sequence raise a ValueError.
    """
    records: list[tuple[str, list[str], int]] = []
    for number, raw in enumerate(Path(path).read_text().splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith(">"):
            records.append((line[1:].strip(), [], number))
        elif not records:
            raise ValueError(f"{path}: line {number} comes before any '>' header; is this a FASTA file?")
        else:
            records[-1][1].append(line)
    if not records:
        raise ValueError(f"{path}: no '>' header found; is this a FASTA file?")
    for name, chunks, number in records:
        if not chunks:
            raise ValueError(f"{path}: the record {name!r} (line {number}) is empty")
    return [(name, "".join(chunks)) for name, chunks, _ in records]
