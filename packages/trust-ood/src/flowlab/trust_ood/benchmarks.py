"""The trust-ood benchmark scenarios, registered under the `flowlab.benchmarks` entry point (prefix `trust`)."""

from flowlab.trust_ood.certificate.benchmarks import SCENARIOS

__all__ = ["SCENARIOS"]
