"""Command groups of flowlab.biology_dynamics: `flowlab cells` (WFR-FM)."""

from flowlab.biology_dynamics.wfr_fm.cli import app as cells_app

__all__ = ["cells_app"]
