"""pi-Flow's scenarios: `toys` (checkerboard and eight Gaussians with exact teachers) and `digits` (the kit's
rectified-flow digits teacher, the headline)."""

from flowlab.vision_gen.pi_flow.benchmarks.digits import DIGITS
from flowlab.vision_gen.pi_flow.benchmarks.toys import TOYS

SCENARIOS = (TOYS, DIGITS)

__all__ = ["DIGITS", "SCENARIOS", "TOYS"]
