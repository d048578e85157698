"""The cross-package benchmark runner behind `flowlab bench`."""

from flowlab.tools.bench.case import Record, run_one
from flowlab.tools.bench.discovery import Discovery, discover, select
from flowlab.tools.bench.report import write_report
from flowlab.tools.bench.runner import run_all

__all__ = ["Discovery", "Record", "discover", "run_all", "run_one", "select", "write_report"]
