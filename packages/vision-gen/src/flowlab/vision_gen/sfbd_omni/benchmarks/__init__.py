"""SFBD-OMNI's scenario: `digits` (the headline), digits seen through black-box corruptions plus 50 clean ones."""

from flowlab.vision_gen.sfbd_omni.benchmarks.digits import DIGITS

SCENARIOS = (DIGITS,)

__all__ = ["DIGITS", "SCENARIOS"]
