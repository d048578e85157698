"""A distilled student on disk: `student.safetensors` (its weights) and `config.json` (the pi-Flow config and the
teacher config it was distilled from), so a student loads without its teacher's weights."""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from flowlab.vision_gen.kit.teachers import DigitsTeacher, TeacherConfig
from flowlab.vision_gen.pi_flow.model import PiFlowConfig, Student, digits_student

__all__ = ["load_student", "save_student"]


def save_student(folder: str | os.PathLike[str], student: Student, config: PiFlowConfig, teacher: TeacherConfig):
    """Write the student of `config`, distilled from a teacher of `teacher`, into `folder` (created)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().cpu().contiguous() for k, v in student.state_dict().items()},
              folder / "student.safetensors")  # fmt: skip
    meta = {"pi_flow": config.to_dict(), "teacher": teacher.to_dict()}
    (folder / "config.json").write_text(json.dumps(meta, indent=2))


def load_student(
    folder: str | os.PathLike[str], *, device: torch.device | str = "cpu"
) -> tuple[Student, PiFlowConfig, TeacherConfig]:
    """The student saved in `folder` (eval mode, no grad, on `device`) with its two configs."""
    folder = Path(folder)
    for name in ("config.json", "student.safetensors"):
        if not (folder / name).is_file():
            raise ValueError(f"student: {folder} is not a saved student (no {name})")
    try:
        meta = json.loads((folder / "config.json").read_text())
        config = PiFlowConfig.from_mapping(meta["pi_flow"])
        teacher_config = TeacherConfig.from_mapping(meta["teacher"])
    except (json.JSONDecodeError, KeyError, TypeError) as err:
        raise ValueError(f"student: {folder / 'config.json'} is not a pi-Flow student config ({err})") from err
    student = digits_student(config, DigitsTeacher(teacher_config))
    try:
        student.load_state_dict(load_file(folder / "student.safetensors"))
    except Exception as err:  # safetensors' own errors and shape mismatches
        raise ValueError(f"student: {folder / 'student.safetensors'} does not hold this student's weights") from err
    return student.to(device).eval().requires_grad_(False), config, teacher_config
