"""JLBC: joint-likelihood certificates of trust for regression (Raonic, Mishra, Lanthaler 2025, arXiv 2509.25080).

A score model over concatenated (input, target) fields scores a regressor's prediction by log p(x*, Psi(x*)) from the
probability-flow ODE (core likelihood, Hutchinson divergence); a threshold from a few ID samples turns it into a
trust decision. 1-D heat and Burgers data, FNO/CNN regressors and the baselines live beside it.
"""

from flowlab.trust_ood.certificate.baselines import ensemble_score, mc_dropout_score, score_norm_statistic
from flowlab.trust_ood.certificate.evaluate import (
    StudyConfig,
    StudyModels,
    StudyResult,
    evaluate_study,
    load_study,
    measure_latency,
    run_study,
    save_study,
    train_study,
)
from flowlab.trust_ood.certificate.joint_model import EPS, JointScoreModel, train_score_model
from flowlab.trust_ood.certificate.metrics import acc_fpr_at_threshold, auroc, relative_l1
from flowlab.trust_ood.certificate.pde1d import (
    FAMILIES,
    PDEConfig,
    PDEData,
    burgers_solve,
    generate,
    heat_solve,
    initial_conditions,
)
from flowlab.trust_ood.certificate.regressors import CNN1d, FNO1d, predict, train_regressor
from flowlab.trust_ood.certificate.score import (
    SPACINGS,
    VARIANTS,
    CertificateResult,
    DensityModels,
    ErrorModel,
    calibrate_threshold,
    certificate,
    field_log_likelihood,
    likelihood_grid,
    score_velocity,
)

__all__ = [
    "EPS",
    "FAMILIES",
    "SPACINGS",
    "VARIANTS",
    "CNN1d",
    "CertificateResult",
    "DensityModels",
    "ErrorModel",
    "FNO1d",
    "JointScoreModel",
    "PDEConfig",
    "PDEData",
    "StudyConfig",
    "StudyModels",
    "StudyResult",
    "acc_fpr_at_threshold",
    "auroc",
    "burgers_solve",
    "calibrate_threshold",
    "certificate",
    "ensemble_score",
    "evaluate_study",
    "field_log_likelihood",
    "generate",
    "heat_solve",
    "initial_conditions",
    "likelihood_grid",
    "load_study",
    "mc_dropout_score",
    "measure_latency",
    "predict",
    "relative_l1",
    "run_study",
    "save_study",
    "score_norm_statistic",
    "score_velocity",
    "train_regressor",
    "train_score_model",
    "train_study",
]
