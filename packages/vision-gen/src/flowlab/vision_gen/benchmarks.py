"""Benchmark scenarios of flowlab.vision_gen (prefix `vision`)."""

from flowlab.vision_gen.cmt.benchmarks import SCENARIOS as CMT
from flowlab.vision_gen.dsa.benchmarks import SCENARIOS as DSA
from flowlab.vision_gen.flashworld.benchmarks import SCENARIOS as FLASHWORLD
from flowlab.vision_gen.gendr_pix.benchmarks import SCENARIOS as GENDR_PIX
from flowlab.vision_gen.kit.benchmarks import AUTOENCODER, TEACHERS
from flowlab.vision_gen.patronus.benchmarks import SCENARIOS as PATRONUS
from flowlab.vision_gen.pi_flow.benchmarks import SCENARIOS as PI_FLOW
from flowlab.vision_gen.promoe.benchmarks import SCENARIOS as PROMOE
from flowlab.vision_gen.sfbd_omni.benchmarks import SCENARIOS as SFBD_OMNI
from flowlab.vision_gen.watermark.benchmarks import E2E, STATS
from flowlab.vision_gen.watermark.molm.benchmarks import SCENARIOS as MOLM

SCENARIOS = (
    TEACHERS,
    AUTOENCODER,
    STATS,
    E2E,
    *PI_FLOW,
    *SFBD_OMNI,
    *CMT,
    *GENDR_PIX,
    *PROMOE,
    *PATRONUS,
    *DSA,
    *MOLM,
    *FLASHWORLD,
)
