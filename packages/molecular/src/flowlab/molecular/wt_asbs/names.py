"""Names of the WT-ASBS systems, kept free of heavy imports so that the command line can offer them cheaply."""

__all__ = ["TOYS"]

TOYS = ("mueller-brown", "four-well", "four-well-5d")
