"""GenDR-Pix's scenario: `photos` (the headline), x4 super-resolution of the bundled photos."""

from flowlab.vision_gen.gendr_pix.benchmarks.photos import PHOTOS

SCENARIOS = (PHOTOS,)

__all__ = ["PHOTOS", "SCENARIOS"]
