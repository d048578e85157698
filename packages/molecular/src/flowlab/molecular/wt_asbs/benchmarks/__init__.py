"""The WT-ASBS benchmark scenarios: `mol.wt_asbs.toy` (`toy`), `mol.wt_asbs.aldp` (`aldp`), `mol.wt_asbs.sn2`
(`sn2`); shared pieces in `common`."""

from flowlab.molecular.wt_asbs.benchmarks.aldp import ALDP
from flowlab.molecular.wt_asbs.benchmarks.sn2 import SN2
from flowlab.molecular.wt_asbs.benchmarks.toy import TOY

SCENARIOS = (TOY, ALDP, SN2)

__all__ = ["SCENARIOS"]
