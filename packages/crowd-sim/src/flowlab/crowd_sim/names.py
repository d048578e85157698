"""Names of the shared crowd scenes, kept free of heavy imports so that the command line can offer them cheaply."""

__all__ = ["SCENES"]

SCENES = ("ucy_students03", "gc")
