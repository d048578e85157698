"""Benchmark scenarios of flowlab.vision_gen (prefix `vision`)."""

from flowlab.vision_gen.watermark.benchmarks import E2E, STATS

SCENARIOS = (STATS, E2E)
