"""EnvSocial-Diff's scenarios: the simulation protocol on both scenes (`simulation`: crowd.envsocial.{ucy,gc}) and the
standard forecasting protocol (`forecast`: crowd.envsocial.forecast)."""

from flowlab.crowd_sim.envsocial_diff.benchmarks.forecast import FORECAST
from flowlab.crowd_sim.envsocial_diff.benchmarks.simulation import SIMULATION

SCENARIOS = (*SIMULATION, FORECAST)

__all__ = ["FORECAST", "SCENARIOS", "SIMULATION"]
