"""WT-ASBS: the adjoint Schroedinger-bridge sampler with a well-tempered collective-variable bias."""

from flowlab.molecular.wt_asbs.analysis import (
    basin_coverage,
    delta_f_from_pmf,
    delta_f_from_samples,
    fes_rmse,
    pmf_from_samples,
    pmf_quadrature,
    reweight,
)
from flowlab.molecular.wt_asbs.asbs import ASBS, ASBSConfig, EDMNoise, TrainLog, clip_per_atom
from flowlab.molecular.wt_asbs.bias import BiasValue, WellTemperedBias
from flowlab.molecular.wt_asbs.cvs import CVSet, DistanceCV, DistanceDifferenceCV, LinearCV, TorsionCV
from flowlab.molecular.wt_asbs.potentials import (
    EV_TO_KJMOL,
    KB_KJMOL,
    EmbeddedToy,
    EnergyForces,
    FourWell,
    MuellerBrown,
    OpenMMPotential,
    Potential,
    ToyPotential,
    kT_kjmol,
)
from flowlab.molecular.wt_asbs.reference import LangevinResult, MetadResult, langevin, openmm_md, openmm_wtmetad

__all__ = [
    "ASBS",
    "EV_TO_KJMOL",
    "KB_KJMOL",
    "ASBSConfig",
    "BiasValue",
    "CVSet",
    "DistanceCV",
    "DistanceDifferenceCV",
    "EDMNoise",
    "EmbeddedToy",
    "EnergyForces",
    "FourWell",
    "LangevinResult",
    "LinearCV",
    "MetadResult",
    "MuellerBrown",
    "OpenMMPotential",
    "Potential",
    "TorsionCV",
    "ToyPotential",
    "TrainLog",
    "WellTemperedBias",
    "basin_coverage",
    "clip_per_atom",
    "delta_f_from_pmf",
    "delta_f_from_samples",
    "fes_rmse",
    "kT_kjmol",
    "langevin",
    "openmm_md",
    "openmm_wtmetad",
    "pmf_from_samples",
    "pmf_quadrature",
    "reweight",
]
