"""What the vision commands that distil from a kit teacher share at the CLI layer: the teacher's config from their
`--teacher-*` options, a bad one reported against its option. Imports nothing heavy."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flowlab.core.cli import option_error

if TYPE_CHECKING:
    import torch

    from flowlab.vision_gen.kit.teachers import TeacherConfig

__all__ = ["TEACHER_OPTIONS", "teacher_from_options"]

#: the commands' options of the teacher config's fields
TEACHER_OPTIONS = {"dim": "--teacher-dim", "depth": "--teacher-depth", "steps": "--teacher-steps"}


def teacher_from_options(device: torch.device, **fields: Any) -> TeacherConfig:
    """`TeacherConfig(**fields)` for `device`'s type, a bad field reported against its option (`TEACHER_OPTIONS`)."""
    from flowlab.vision_gen.kit.teachers import TeacherConfig

    try:
        return TeacherConfig(device=device.type, **fields)
    except ValueError as err:
        raise option_error(err, TEACHER_OPTIONS) from err
