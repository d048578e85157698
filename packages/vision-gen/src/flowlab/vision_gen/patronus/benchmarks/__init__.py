"""Patronus's scenarios: `vision.patronus.digits` (the headline: quality, probes, localisation) and
`vision.patronus.shortcut` (the planted-shortcut diagnosis)."""

from flowlab.vision_gen.patronus.benchmarks.digits import DIGITS, DigitsBench
from flowlab.vision_gen.patronus.benchmarks.shortcut import SHORTCUT, ShortcutBench

__all__ = ["DIGITS", "SCENARIOS", "SHORTCUT", "DigitsBench", "ShortcutBench"]

SCENARIOS = (DIGITS, SHORTCUT)
