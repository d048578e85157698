"""Command groups of flowlab.vision_gen: `flowlab watermark` (the watermark family: Spherical Watermark with its
baselines Gaussian Shading and Tree-Ring: keygen, embed, extract, evaluate)."""

import typer

from flowlab.vision_gen.watermark import cli as watermark

app = typer.Typer(
    help="Latent watermarks for diffusion models: Spherical Watermark, Gaussian Shading, Tree-Ring.",
    no_args_is_help=True,
)
app.registered_commands += watermark.app.registered_commands

__all__ = ["app"]
