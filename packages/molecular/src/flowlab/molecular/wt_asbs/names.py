"""Names of the WT-ASBS systems and of the files `export` and `evaluate --plot` write, kept free of heavy imports so
that the command line can offer them cheaply."""

__all__ = ["TOYS", "TRAJECTORY_SUFFIXES"]

TOYS = ("mueller-brown", "four-well", "four-well-5d")
#: the trajectory files `export` writes, chosen by extension: multi-model PDB, DCD (molecules), XYZ (any system)
TRAJECTORY_SUFFIXES = (".pdb", ".dcd", ".xyz")
