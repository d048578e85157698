"""FlowLab dataset catalogue, data-root resolution and synthetic generators."""

__version__ = "0.1.0"
