"""Benchmark scenarios `core.gfm.earth`, `core.gfm.torus`, `core.gfm.torus7`, `core.gfm.hyperbolic` (exposed as
`SCENARIOS`).

Each trains, in one process and from one seed, the GFM objectives of its variant and the RFM baseline (the same
network trained on the diagonal only) and reports, per data set:
- the geodesic-kernel MMD to held-out data (earth: cfg.mmd_reference, the validation and test splits in both
  registered variants or the test split alone; torus, disk: the test set) at 1, 2, 4, 8 and 100 NFE (GFM: exp-map
  jumps of X_{s,t}; RFM: exp-map Euler steps of v_{t,t}), one multi-scale kernel for every method,
  Σ_j exp(−d_g²/(2 h_j²)) with h_j = h / 2^j, j = 0..3, h the median geodesic distance of the held-out set (the
  median kernel alone, the spec's choice, reads 0 for every method on T²);
- the NLL from v_{t,t} (earth: test NLL; torus and disk also KL = E_test[log p − log q] to the exact density);
  `nll_left_frac` is the share of test points whose reverse flow reaches the disk's edge: the model gives them zero
  density, so NLL and KL read inf (they used to read a large negative number from the clamped trajectory);
- the relative semigroup defect of the map and the distance of the 1-NFE samples from the manifold.
Every MMD is the signed root of the unbiased MMD², never clipped at 0 (a sample as good as the data scores near 0,
either side). `metrics` holds the primary objective (G-LSD where trained), `baselines` the other objectives, RFM and
the data floor (what a perfect sampler scores: the mean MMD to the held-out set of ten draws of as many training
points as model samples; its row also holds `mmd_split_floor`, the MMD's noise floor: the RMS size of the MMD between
two random halves of the held-out set). On the earth sets the data floor is large and split-dependent: volcano's
held-out splits hold 166 points (83 test), many of them repeated locations, and at 1 NFE one fifth of RFM's MMD can
lie below it. Runs single-threaded: on the shared 2-core machine two torch threads per process are several times
slower than one.
"""

from flowlab.core.gfm.benchmarks.earth import EARTH
from flowlab.core.gfm.benchmarks.synthetic import HYPERBOLIC, TORUS, TORUS7

__all__ = ["SCENARIOS"]

SCENARIOS = (EARTH, TORUS, TORUS7, HYPERBOLIC)
