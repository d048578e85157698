"""MOLM's benchmark scenarios: `digits` (the headline: MOLM against its baselines under every attack) and `capacity`
(the (L, P) trade-off between key length and quality)."""

from flowlab.vision_gen.watermark.molm.benchmarks.capacity import CAPACITY
from flowlab.vision_gen.watermark.molm.benchmarks.digits import DIGITS

SCENARIOS = (DIGITS, CAPACITY)

__all__ = ["CAPACITY", "DIGITS", "SCENARIOS"]
