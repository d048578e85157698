"""The `flowlab trust` command group."""

from flowlab.trust_ood.certificate.cli import app

__all__ = ["app"]
