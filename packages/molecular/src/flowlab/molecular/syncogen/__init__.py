"""SynCoGen (Rekesh et al., ICLR 2026): synthesizable 3-D molecules from a joint model of building-block graphs
(masked discrete diffusion over blocks and reactions, with compatibility, tree and connectivity masks at sampling)
and atom coordinates (flow matching), reassembled with RDKit reaction templates; with the ETKDG and atom-level
baselines and ablations, on a mini SynSpace built from the shipped vocabulary. See README.md."""

from flowlab.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "flowlab.molecular.syncogen.assemble": ["Assembly", "AssemblyError", "assemble", "pair_index"],
        "flowlab.molecular.syncogen.constraints": ["GraphConstraints", "violations"],
        "flowlab.molecular.syncogen.evaluate": [
            "Generated",
            "decode_atoms",
            "decode_blocks",
            "intramolecular_checks",
            "score",
            "strain",
            "with_etkdg",
            "write_sdf",
            "xtb_energy",
        ],
        "flowlab.molecular.syncogen.model": ["JointNet", "JointOutput", "NetConfig", "SelfCondition", "TokenTables"],
        "flowlab.molecular.syncogen.names": ["ETKDG", "VARIANTS"],
        "flowlab.molecular.syncogen.objective": ["LossConfig", "joint_loss", "token_paths"],
        "flowlab.molecular.syncogen.sample": ["Samples", "sample_joint"],
        "flowlab.molecular.syncogen.space": ["SpaceConfig", "SynSpace", "embed_conformers", "load_space"],
        "flowlab.molecular.syncogen.train": ["TrainConfig", "build_net", "load_run", "save_run", "train_variant"],
        "flowlab.molecular.syncogen.views": ["GraphData", "atom_view", "block_view"],
        "flowlab.molecular.syncogen.vocabulary": ["Vocabulary", "default_vocabulary", "load_vocabulary"],
    },
)
