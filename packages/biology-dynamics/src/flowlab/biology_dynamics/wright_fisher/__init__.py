"""Wright-Fisher simplicial diffusion (issue 27), being built: the exact forward process (`WrightFisherPath`), the
ancestral-lineage law and its table, the transition density (lineage mixture and spectral series) and its score,
the ELBO, the hollow wrapper and the reverse-SDE sampler; the discrete and Gaussian domains and the unified
sufficient-statistic training across all three; DNA encoding and JASPAR motif tasks."""

from flowlab.biology_dynamics.wright_fisher.ancestral import (
    griffiths_moments,
    lineage_probs,
    sample_lineages,
    simulate_lineages,
)
from flowlab.biology_dynamics.wright_fisher.discrete import DiscreteDomain
from flowlab.biology_dynamics.wright_fisher.dna import ALPHABET, decode, encode, one_hot, read_fasta, write_fasta
from flowlab.biology_dynamics.wright_fisher.gaussian import GaussianDomain
from flowlab.biology_dynamics.wright_fisher.hollow import Hollow
from flowlab.biology_dynamics.wright_fisher.likelihood import lineage_posterior, log_ratio
from flowlab.biology_dynamics.wright_fisher.motifs import (
    MotifTask,
    hit_rate,
    load_motifs,
    profile,
    profile_mse,
    pwm_scan,
    sample_motif_sequences,
)
from flowlab.biology_dynamics.wright_fisher.nets import SequenceCNN, SequenceMLP
from flowlab.biology_dynamics.wright_fisher.objective import WrightFisherELBO
from flowlab.biology_dynamics.wright_fisher.process import WrightFisherPath
from flowlab.biology_dynamics.wright_fisher.sample import sample_wright_fisher
from flowlab.biology_dynamics.wright_fisher.table import LineageTable, lineage_table
from flowlab.biology_dynamics.wright_fisher.unified import DOMAINS, SimplicialDomain, UnifiedLoss, domain

__all__ = [
    "ALPHABET",
    "DOMAINS",
    "DiscreteDomain",
    "GaussianDomain",
    "Hollow",
    "LineageTable",
    "MotifTask",
    "SequenceCNN",
    "SequenceMLP",
    "SimplicialDomain",
    "UnifiedLoss",
    "WrightFisherELBO",
    "WrightFisherPath",
    "decode",
    "domain",
    "encode",
    "griffiths_moments",
    "hit_rate",
    "lineage_posterior",
    "lineage_probs",
    "lineage_table",
    "load_motifs",
    "log_ratio",
    "one_hot",
    "profile",
    "profile_mse",
    "pwm_scan",
    "read_fasta",
    "sample_lineages",
    "sample_motif_sequences",
    "sample_wright_fisher",
    "simulate_lineages",
    "write_fasta",
]
