"""Names of the certificate study's PDEs, data families, regressors, certificate variants and compared scores, kept
free of heavy imports so that the `flowlab trust` CLI can offer them cheaply."""

from typing import Literal, get_args

__all__ = ["FAMILIES", "METHODS", "PDE", "PDES", "REGRESSORS", "VARIANTS", "Regressor"]

FAMILIES = ("id", "high_freq", "bumps", "param_shift")
PDE = Literal["heat", "burgers"]
PDES: tuple[str, ...] = get_args(PDE)
#: the regressor backbones a study can train as Psi (and its ensemble)
Regressor = Literal["fno", "cnn"]
REGRESSORS: tuple[str, ...] = get_args(Regressor)
#: the scores compared in every table: ours first, then the baselines
METHODS = ("joint", "input_only", "conditional", "mc_dropout", "ensemble", "score_norm")
VARIANTS = ("x&y", "x", "y", "y|x", "x|y")
