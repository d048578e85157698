"""The `flowlab` command and the cross-package benchmark runner."""

__version__ = "0.1.0"
