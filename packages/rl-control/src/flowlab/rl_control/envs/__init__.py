"""Environments and their offline data: single-agent gymnasium control (`control`), the two-agent coordination games
(`coordination`) and the multi-agent particle environment simple_spread (`spread`); the reference returns that
normalise their scores (`scores`)."""
