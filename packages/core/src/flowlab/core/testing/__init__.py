"""The shipped test kit: analytic problems with exact answers, convergence-order asserts, devices, the bad-input kit
of every entry point, `ctrl_c_at` for resume tests, a pytest plugin (no-network guard, `device` and `one_thread`
fixtures, `gpu` marker)."""

from flowlab.core.testing.analytic import GaussianMixture, GaussianToGaussian
from flowlab.core.testing.asserts import (
    assert_convergence_order,
    assert_moments_close,
    assert_same_tensors,
    empirical_order,
)
from flowlab.core.testing.bad_input import KINDS, BadInput, bad_files, check_bad_inputs, uncovered_commands
from flowlab.core.testing.checkerboard import Checkerboard
from flowlab.core.testing.devices import available_devices
from flowlab.core.testing.interrupt import ctrl_c_at

__all__ = [
    "KINDS",
    "BadInput",
    "Checkerboard",
    "GaussianMixture",
    "GaussianToGaussian",
    "assert_convergence_order",
    "assert_moments_close",
    "assert_same_tensors",
    "available_devices",
    "bad_files",
    "check_bad_inputs",
    "ctrl_c_at",
    "empirical_order",
    "uncovered_commands",
]
