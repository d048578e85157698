"""Scenarios of CMT: `vision.cmt.digits`."""

from flowlab.vision_gen.cmt.benchmarks.digits import DIGITS

SCENARIOS = (DIGITS,)
