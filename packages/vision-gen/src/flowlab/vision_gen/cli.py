"""Command groups of flowlab.vision_gen: `flowlab watermark` (the watermark family: Spherical Watermark with its
baselines Gaussian Shading and Tree-Ring: keygen, embed, extract, generate, invert, attack, detect, evaluate; MOLM:
`molm train|evaluate`) and
`flowlab vision` (the other methods' groups: `piflow`, `sfbd`, `cmt`, `sr`, `promoe`, `patronus`, `dsa`, `scene3d`
(FlashWorld), and `upscale`)."""

import typer

from flowlab.vision_gen.cmt import cli as cmt
from flowlab.vision_gen.dsa import cli as dsa
from flowlab.vision_gen.flashworld import cli as flashworld
from flowlab.vision_gen.gendr_pix import cli as gendr_pix
from flowlab.vision_gen.patronus import cli as patronus
from flowlab.vision_gen.pi_flow import cli as pi_flow
from flowlab.vision_gen.promoe import cli as promoe
from flowlab.vision_gen.sfbd_omni import cli as sfbd
from flowlab.vision_gen.watermark import cli as watermark
from flowlab.vision_gen.watermark.molm import cli as molm

app = typer.Typer(
    help="Latent watermarks for diffusion models: Spherical Watermark, Gaussian Shading, Tree-Ring.",
    no_args_is_help=True,
)
app.registered_commands += watermark.app.registered_commands
app.add_typer(molm.app, name="molm")

vision = typer.Typer(
    help="Vision generation methods: pi-Flow, SFBD-OMNI, CMT, GenDR-Pix super-resolution, ProMoE, Patronus, DSA, "
    "FlashWorld.",
    no_args_is_help=True,
)
vision.add_typer(pi_flow.app, name="piflow")
vision.add_typer(sfbd.app, name="sfbd")
vision.add_typer(cmt.app, name="cmt")
vision.add_typer(gendr_pix.app, name="sr")
vision.add_typer(promoe.app, name="promoe")
vision.add_typer(patronus.app, name="patronus")
vision.add_typer(dsa.app, name="dsa")
vision.add_typer(flashworld.app, name="scene3d")
vision.command("upscale")(gendr_pix.upscale)

__all__ = ["app", "vision"]
