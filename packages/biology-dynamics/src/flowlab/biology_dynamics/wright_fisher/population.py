"""A Wright-Fisher population of `zeta` individuals with mutation, simulated generation by generation: the finite
model whose diffusion limit the exact sampler draws from, an independent route to the same law.

Each generation every offspring copies a uniformly drawn parent and then, with probability u = psi / (2 zeta),
mutates to a letter drawn from pi: counts n' ~ Multinomial(zeta, (1 - u) n / zeta + u pi). Two lineages meet in a
generation with probability 1 / zeta and a lineage mutates with probability u, so zeta generations are one unit of
the diffusion's time tau: lineages coalesce at rate 1 per pair and die by mutation at rate psi / 2 each, the
k (k + psi - 1) / 2 of the lineage law. x = n / zeta tends to the Wright-Fisher diffusion as zeta grows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from flowlab.core.distributions import multinomial_counts

__all__ = ["simulate_population"]


def simulate_population(
    letter: int,
    taus: Sequence[float],
    *,
    letters: int,
    zeta: int,
    n: int,
    psi: float | None = None,
    generator: torch.Generator,
) -> torch.Tensor:
    """`n` independent populations of `zeta` individuals, all of letter `letter` at tau = 0, observed at each of the
    increasing `taus` (the nearest whole generation, round(zeta tau)) -> (len(taus), n, letters) float64 frequencies.
    psi: the mutation rate (default: letters, as in `WrightFisherPath`). Costs zeta max(taus) multinomial draws."""
    if isinstance(letters, bool) or not isinstance(letters, int) or letters < 2:
        raise ValueError(f"letters: expected an alphabet size >= 2, got {letters!r}")
    if isinstance(letter, bool) or not isinstance(letter, int) or not 0 <= letter < letters:
        raise ValueError(f"letter: expected a letter in [0, {letters}), got {letter!r}")
    for value, name in ((zeta, "zeta"), (n, "n")):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}: expected a positive integer, got {value!r}")
    psi = float(letters) if psi is None else psi
    if isinstance(psi, bool) or not (isinstance(psi, int | float) and math.isfinite(psi) and psi > 0):
        raise ValueError(f"psi: expected a positive mutation rate, got {psi!r}")
    taus = [float(t) for t in taus]
    if not taus or any(t < 0 or not math.isfinite(t) for t in taus) or sorted(taus) != taus:
        raise ValueError(f"taus: expected increasing non-negative times, got {taus!r}")
    u = psi / (2 * zeta)
    if u > 1:
        raise ValueError(f"zeta: psi / (2 zeta) = {u:g} is a mutation probability above 1; use zeta >= psi / 2")
    counts = torch.zeros(n, letters, dtype=torch.float64)
    counts[:, letter] = zeta
    out, generation = [], 0
    for tau in taus:
        for _ in range(round(zeta * tau) - generation):
            counts = multinomial_counts((1 - u) * counts / zeta + u / letters, zeta, generator=generator)
        generation = round(zeta * tau)
        out.append(counts / zeta)
    return torch.stack(out)
