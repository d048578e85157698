"""Vision generation methods (watermarks, MoE, distillation, super-resolution) on the FlowLab core."""

__version__ = "0.1.0"
