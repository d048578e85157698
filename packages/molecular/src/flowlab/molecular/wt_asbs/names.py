"""Names of the WT-ASBS systems and of the files `export` and `evaluate --plot` write, kept free of heavy imports so
that the command line can offer them cheaply."""

__all__ = ["POSITION_SUFFIXES", "SYSTEM_SUFFIXES", "TOYS", "TRAJECTORY_SUFFIXES", "USER_SYSTEM"]

TOYS = ("mueller-brown", "four-well", "four-well-5d")
#: the trajectory files `export` writes, chosen by extension: multi-model PDB, DCD (molecules), XYZ (any system)
TRAJECTORY_SUFFIXES = (".pdb", ".dcd", ".xyz")
#: a user's own molecule (`sample --system FILE`): its system file, its positions file, and the run's system name
SYSTEM_SUFFIXES = (".prmtop", ".xml")
POSITION_SUFFIXES = (".inpcrd", ".pdb")
USER_SYSTEM = "user"
