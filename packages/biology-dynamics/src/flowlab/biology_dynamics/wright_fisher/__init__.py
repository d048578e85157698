"""Wright-Fisher simplicial diffusion (issue 27), being built: the exact forward process (`WrightFisherPath`), the
ancestral-lineage law and its table, the transition density (lineage mixture and spectral series) and its score,
the ELBO, the hollow wrapper and the reverse-SDE sampler; the discrete and Gaussian domains and the unified
sufficient-statistic training across all three; the zeta-discrete family between them and a finite Wright-Fisher
population; DNA encoding and JASPAR motif tasks."""

from flowlab.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "flowlab.biology_dynamics.wright_fisher.ancestral": [
            "death_process_probs",
            "griffiths_moments",
            "lineage_probs",
            "sample_lineages",
            "simulate_lineages",
        ],
        "flowlab.biology_dynamics.wright_fisher.discrete": ["DiscreteDomain"],
        "flowlab.biology_dynamics.wright_fisher.dna": [
            "ALPHABET",
            "decode",
            "encode",
            "one_hot",
            "read_fasta",
            "write_fasta",
        ],
        "flowlab.biology_dynamics.wright_fisher.gaussian": ["GaussianDomain"],
        "flowlab.biology_dynamics.wright_fisher.hollow": ["Hollow"],
        "flowlab.biology_dynamics.wright_fisher.likelihood": ["lineage_posterior", "log_ratio"],
        "flowlab.biology_dynamics.wright_fisher.motifs": [
            "MotifTask",
            "check_profile",
            "hit_rate",
            "load_motifs",
            "profile",
            "profile_mse",
            "pwm_scan",
            "read_profile",
            "sample_motif_sequences",
        ],
        "flowlab.biology_dynamics.wright_fisher.nets": ["SequenceCNN", "SequenceMLP"],
        "flowlab.biology_dynamics.wright_fisher.objective": ["WrightFisherELBO"],
        "flowlab.biology_dynamics.wright_fisher.population": ["simulate_population"],
        "flowlab.biology_dynamics.wright_fisher.process": ["WrightFisherPath"],
        "flowlab.biology_dynamics.wright_fisher.sample": ["sample_wright_fisher"],
        "flowlab.biology_dynamics.wright_fisher.table": ["LineageTable", "lineage_table"],
        "flowlab.biology_dynamics.wright_fisher.unified": ["DOMAINS", "SimplicialDomain", "UnifiedLoss", "domain"],
        "flowlab.biology_dynamics.wright_fisher.zeta": ["ZetaDiscreteDomain", "zeta_diffusion_term"],
    },
)
