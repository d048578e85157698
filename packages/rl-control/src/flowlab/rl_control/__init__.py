"""Flow-based reinforcement learning and control on the FlowLab core."""

__version__ = "0.1.0"
