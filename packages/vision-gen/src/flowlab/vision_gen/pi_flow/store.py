"""A distilled student on disk: `student.safetensors` (its weights) and `config.json` (the pi-Flow config and the
teacher config it was distilled from), so a student loads without its teacher's weights."""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from flowlab.vision_gen.kit.store import load_weights, read_config, save_weights
from flowlab.vision_gen.kit.teachers import DigitsTeacher, TeacherConfig
from flowlab.vision_gen.pi_flow.model import PiFlowConfig, Student, digits_student

__all__ = ["load_student", "save_student"]

FORMAT, VERSION = "flowlab.vision_gen.pi_flow", 1


def save_student(folder: str | os.PathLike[str], student: Student, config: PiFlowConfig, teacher: TeacherConfig):
    """Write the student of `config`, distilled from a teacher of `teacher`, into `folder` (created)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    save_weights(student, folder / "student.safetensors")
    meta = {"format": FORMAT, "version": VERSION, "pi_flow": config.to_dict(), "teacher": teacher.to_dict()}
    (folder / "config.json").write_text(json.dumps(meta, indent=2))


def load_student(
    folder: str | os.PathLike[str], *, device: torch.device | str = "cpu"
) -> tuple[Student, PiFlowConfig, TeacherConfig]:
    """The student saved in `folder` (eval mode, no grad, on `device`) with its two configs."""
    folder = Path(folder)
    meta = read_config(folder, format=FORMAT, version=VERSION, files=("student.safetensors",), what="pi-Flow student",
                       command="flowlab vision piflow distill", name="student")  # fmt: skip
    try:
        config = PiFlowConfig.from_mapping(meta["pi_flow"])
        teacher_config = TeacherConfig.from_mapping(meta["teacher"])
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"student: {folder / 'config.json'} is not a pi-Flow student config ({err})") from err
    student = digits_student(config, DigitsTeacher(teacher_config))
    load_weights(student, folder / "student.safetensors", "student")
    return student.to(device).eval().requires_grad_(False), config, teacher_config
