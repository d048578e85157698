"""WT-ASBS: the adjoint Schroedinger-bridge sampler with a well-tempered collective-variable bias."""

from flowlab.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "flowlab.molecular.wt_asbs.analysis": [
            "basin_coverage",
            "delta_f_from_pmf",
            "delta_f_from_samples",
            "fes_rmse",
            "pmf_from_samples",
            "pmf_quadrature",
            "reweight",
            "torsion_marginal_kl",
            "torsion_w2",
        ],
        "flowlab.molecular.wt_asbs.asbs": [
            "ASBS",
            "ASBSConfig",
            "EDMNoise",
            "SamplerConfig",
            "TrainLog",
            "clip_per_atom",
        ],
        "flowlab.molecular.wt_asbs.bias": ["BiasConfig", "BiasValue", "WellTemperedBias"],
        "flowlab.molecular.wt_asbs.cvs": ["CVSet", "DistanceCV", "DistanceDifferenceCV", "LinearCV", "TorsionCV"],
        "flowlab.molecular.wt_asbs.dihedrals": [
            "DihedralSystem",
            "dihedral_bias",
            "dihedral_cvs",
            "dihedral_system",
            "molecule_topology",
            "parse_cv",
        ],
        "flowlab.molecular.wt_asbs.potentials": [
            "BOHR_NM",
            "EV_TO_KJMOL",
            "HARTREE_TO_KJMOL",
            "KB_KJMOL",
            "DistanceWalls",
            "EmbeddedToy",
            "EnergyForces",
            "FourWell",
            "MuellerBrown",
            "OpenMMPotential",
            "Potential",
            "TBLitePotential",
            "ToyPotential",
            "kT_kjmol",
        ],
        "flowlab.molecular.wt_asbs.reference": [
            "LangevinResult",
            "MetadResult",
            "langevin",
            "openmm_md",
            "openmm_wtmetad",
        ],
        "flowlab.molecular.wt_asbs.sn2": ["REACTANT", "mirror", "reaction_cv", "sn2_potential"],
    },
)
