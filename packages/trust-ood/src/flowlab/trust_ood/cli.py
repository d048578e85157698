"""`flowlab trust`: the trust-ood command group; the certificate (JLBC) mounts `train`, `certify` and `evaluate`."""

import typer

from flowlab.trust_ood.certificate import cli as certificate

app = typer.Typer(help="Joint-likelihood certificates of trust for PDE regression (JLBC).", no_args_is_help=True)
app.registered_commands += certificate.app.registered_commands

__all__ = ["app"]
