"""The agent names of Value Flows and its baselines, kept free of heavy imports for the `flowlab rl` CLI."""

from typing import Literal, get_args

__all__ = ["METHODS", "Method"]

Method = Literal["value_flows", "c51", "iqn", "td"]
METHODS: tuple[str, ...] = get_args(Method)
