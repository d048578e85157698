"""pi-Flow's scenarios: `toys` (checkerboard and eight Gaussians with exact teachers), `cfg` (quality against
diversity along the guidance scale) and `digits` (the kit's rectified-flow digits teacher, the headline)."""

from flowlab.vision_gen.pi_flow.benchmarks.cfg import CFG
from flowlab.vision_gen.pi_flow.benchmarks.digits import DIGITS
from flowlab.vision_gen.pi_flow.benchmarks.toys import TOYS

SCENARIOS = (TOYS, CFG, DIGITS)

__all__ = ["CFG", "DIGITS", "SCENARIOS", "TOYS"]
