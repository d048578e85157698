"""JLBC: joint-likelihood certificates of trust for regression (Raonic, Mishra, Lanthaler 2025, arXiv 2509.25080).

A score model over concatenated (input, target) fields scores a regressor's prediction by log p(x*, Psi(x*)) from the
probability-flow ODE (core likelihood, Hutchinson divergence); a threshold from a few ID samples turns it into a
trust decision. 1-D heat and Burgers data, FNO/CNN regressors and the baselines live beside it; `fit_certificate` and
`certify` take the user's own arrays and regressor.
"""

from flowlab.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "flowlab.trust_ood.certificate.arrays": ["check_fields", "load_arrays"],
        "flowlab.trust_ood.certificate.baselines": ["ensemble_score", "mc_dropout_score", "score_norm_statistic"],
        "flowlab.trust_ood.certificate.evaluate": [
            "StudyConfig",
            "StudyModels",
            "StudyResult",
            "evaluate_study",
            "load_study",
            "load_weights_into",
            "measure_latency",
            "run_study",
            "save_study",
            "train_models",
            "train_study",
        ],
        "flowlab.trust_ood.certificate.joint_model": ["EPS", "JointScoreModel", "train_score_model"],
        "flowlab.trust_ood.certificate.metrics": ["acc_fpr_at_threshold", "auroc", "relative_l1"],
        "flowlab.trust_ood.certificate.pde1d": [
            "FAMILIES",
            "PDEConfig",
            "PDEData",
            "burgers_solve",
            "generate",
            "heat_solve",
            "initial_conditions",
        ],
        "flowlab.trust_ood.certificate.regressors": ["CNN1d", "FNO1d", "predict", "train_regressor"],
        "flowlab.trust_ood.certificate.score": [
            "SPACINGS",
            "VARIANTS",
            "CertificateResult",
            "DensityModels",
            "ErrorModel",
            "calibrate_threshold",
            "certificate",
            "field_log_likelihood",
            "likelihood_grid",
            "score_velocity",
        ],
        "flowlab.trust_ood.certificate.user_study": [
            "ArrayRegressor",
            "Certification",
            "array_study_config",
            "calibrated_certificate",
            "certify",
            "fit_certificate",
        ],
    },
)
