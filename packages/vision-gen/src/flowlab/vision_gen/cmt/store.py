"""A consistency student on disk: `student.safetensors` (its weights) and `config.json` (how it was made: the
teacher config, the initialisation, the mid- and post-training configs), so it loads without its teacher's weights."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from flowlab.vision_gen.cmt.meanflow import MeanFlowStudent, meanflow_student
from flowlab.vision_gen.cmt.model import consistency_student
from flowlab.vision_gen.cmt.train import Student
from flowlab.vision_gen.kit.teachers import DigitsTeacher, TeacherConfig

__all__ = ["load_student", "save_student"]


def save_student(folder: str | os.PathLike[str], student: Student, teacher: TeacherConfig,
                 history: dict[str, Any]) -> None:  # fmt: skip
    """Write `student` (a consistency or MeanFlow student made from a teacher of `teacher`; `history`: its init and
    training configs as JSON values) into `folder` (created)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().cpu().contiguous() for k, v in student.state_dict().items()},
              folder / "student.safetensors")  # fmt: skip
    kind = "meanflow" if isinstance(student, MeanFlowStudent) else "consistency"
    meta = {"teacher": teacher.to_dict(), "kind": kind, "sigma_min": getattr(student, "sigma_min", None), **history}
    (folder / "config.json").write_text(json.dumps(meta, indent=2))


def load_student(
    folder: str | os.PathLike[str], *, device: torch.device | str = "cpu"
) -> tuple[Student, TeacherConfig, dict[str, Any]]:
    """The student saved in `folder` (training mode, on `device`), its teacher's config and its history (with
    "kind": consistency or meanflow)."""
    folder = Path(folder)
    for name in ("config.json", "student.safetensors"):
        if not (folder / name).is_file():
            raise ValueError(f"student: {folder} is not a saved CMT student (no {name})")
    try:
        meta = json.loads((folder / "config.json").read_text())
        teacher = TeacherConfig.from_mapping(meta.pop("teacher"))
        sigma_min = meta.pop("sigma_min")
        if meta["kind"] not in ("consistency", "meanflow"):
            raise ValueError(f"unknown kind {meta['kind']!r}")
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
        raise ValueError(f"student: {folder / 'config.json'} is not a CMT student config ({err})") from err
    if meta["kind"] == "meanflow":
        student: Student = meanflow_student(DigitsTeacher(teacher), init="diffusion")
    else:
        student = consistency_student(DigitsTeacher(teacher), init="diffusion", sigma_min=float(sigma_min))
    try:
        student.load_state_dict(load_file(folder / "student.safetensors"))
    except Exception as err:  # safetensors' own errors and shape mismatches
        raise ValueError(f"student: {folder / 'student.safetensors'} does not hold this student's weights") from err
    return student.to(device), teacher, meta
