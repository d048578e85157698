"""Names of the behaviour qualities and coordination games, kept free of heavy imports so that the `flowlab rl` CLI
can offer them cheaply."""

__all__ = ["GAME_NAMES", "QUALITIES", "SPREAD_QUALITIES"]

#: behaviour qualities of the gymnasium control collector (`control.collect`)
QUALITIES = ("expert", "medium", "mixed", "random")
#: behaviour qualities of simple_spread's scripted controller (`spread.collect_spread`)
SPREAD_QUALITIES = ("expert", "medium", "random")
#: the two-agent coordination games, the keys of `coordination.GAMES`
GAME_NAMES = ("matrix", "quadratic", "ring", "xor")
