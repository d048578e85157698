"""Names of the shared crowd scenes and their coordinate frames, kept free of heavy imports so that the command line
can offer them cheaply."""

__all__ = ["FRAMES", "SCENES"]

SCENES = ("ucy_students03", "gc")
FRAMES = ("published", "corrected")
