"""MAC-Flow's baselines, each a `MARLAgent`: the undistilled joint flow, Gaussian and independent BC, MA-TD3+BC and
the DDPM joint-action BC (MADiff-lite)."""

from flowlab.rl_control.mac_flow.baselines.diffusion_bc import DiffusionJointBC
from flowlab.rl_control.mac_flow.baselines.gaussian_bc import GaussianBC
from flowlab.rl_control.mac_flow.baselines.joint_flow import JointFlowAgent
from flowlab.rl_control.mac_flow.baselines.matd3bc import MATD3BC

__all__ = ["MATD3BC", "DiffusionJointBC", "GaussianBC", "JointFlowAgent"]
