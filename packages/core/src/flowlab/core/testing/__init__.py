"""The shipped test kit: analytic problems with exact answers, convergence-order asserts, devices, a pytest plugin."""
