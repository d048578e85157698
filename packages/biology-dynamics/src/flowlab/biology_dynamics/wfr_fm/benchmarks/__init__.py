"""Benchmark scenarios bio.wfr_fm.{gene,emt,dygen,mixture50}: WFR-FM against OT-CFM, UOT-CFM and a simulation-trained
growth neural ODE (twice: through the adjoint of adaptive dopri5 as the spec and TIGON train it, and our faster
backpropagation through fixed-step rk4), all trained in the same process on the same data.
`bio.wfr_fm.plan_scale` times the unbalanced plan solve alone at growing cell counts.

Reported per method: W1 (`ot.emd2`) and TMV per observed time (`w1_t<k>`, `tmv_t<k>`) and their means, training
wall time, and for WFR-FM the path action against the static WFR optimum; with known growth the Pearson correlation
of learned and true growth. `speedup_to_w1`: training time of the neural ODE over WFR-FM's to reach the same mean W1
(the worse of the two final values), from W1-vs-time curves sampled during training (evaluation time excluded);
`speedup_to_w1_rk4` the same against the rk4 variant. `w1_floor_mean`: the mean over the scored times of the W1
between two random halves of the cells (`w1_split_floor`), the metric's sampling-noise level: W1 values near it do
not rank methods, and a W1 target near it times each method's approach to the noise.

| module | holds |
|---|---|
| `settings` | `WFRBench`, the typed settings every scenario shares (defaults: full), `quick(full)`, `with_matching` |
| `curves` | the W1-vs-training-time callback and the time to a W1 target |
| `compare` | every method fitted and scored on one data set, the speed-ups |
| `gene`, `emt`, `dygen` | one scenario each: its settings type, variants, references and run |
| `mixture` | `bio.wfr_fm.mixture50`: a 50-D growing Gaussian mixture, delta from the data, scored on fresh cells |
| `plan_scale` | `bio.wfr_fm.plan_scale`: the unbalanced plan's solve time against cells per time, MM against Sinkhorn |
"""

from flowlab.biology_dynamics.wfr_fm.benchmarks import dygen, emt, gene, mixture, plan_scale

SCENARIOS = (gene.SCENARIO, emt.SCENARIO, dygen.SCENARIO, mixture.SCENARIO, plan_scale.SCENARIO)

__all__ = ["SCENARIOS"]
