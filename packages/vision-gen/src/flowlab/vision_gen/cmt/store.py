"""A consistency student on disk: `student.safetensors` (its weights) and `config.json` (how it was made: the
teacher config, the initialisation, the mid- and post-training configs), so it loads without its teacher's weights."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

from flowlab.vision_gen.cmt.meanflow import MeanFlowStudent, meanflow_student
from flowlab.vision_gen.cmt.model import consistency_student
from flowlab.vision_gen.cmt.train import Student
from flowlab.vision_gen.kit.store import load_weights, read_config, save_weights
from flowlab.vision_gen.kit.teachers import DigitsTeacher, TeacherConfig

__all__ = ["load_student", "save_student"]

FORMAT, VERSION = "flowlab.vision_gen.cmt", 1


def save_student(folder: str | os.PathLike[str], student: Student, teacher: TeacherConfig,
                 history: dict[str, Any]) -> None:  # fmt: skip
    """Write `student` (a consistency or MeanFlow student made from a teacher of `teacher`; `history`: its init and
    training configs as JSON values) into `folder` (created)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    save_weights(student, folder / "student.safetensors")
    kind = "meanflow" if isinstance(student, MeanFlowStudent) else "consistency"
    meta = {"format": FORMAT, "version": VERSION, "teacher": teacher.to_dict(), "kind": kind,
            "sigma_min": getattr(student, "sigma_min", None), **history}  # fmt: skip
    (folder / "config.json").write_text(json.dumps(meta, indent=2))


def load_student(
    folder: str | os.PathLike[str], *, device: torch.device | str = "cpu"
) -> tuple[Student, TeacherConfig, dict[str, Any]]:
    """The student saved in `folder` (training mode, on `device`), its teacher's config and its history (with
    "kind": consistency or meanflow)."""
    folder = Path(folder)
    meta = read_config(folder, format=FORMAT, version=VERSION, files=("student.safetensors",), what="CMT student",
                       command="flowlab vision cmt mid-train", name="student")  # fmt: skip
    del meta["format"], meta["version"]
    try:
        teacher = TeacherConfig.from_mapping(meta.pop("teacher"))
        sigma_min = meta.pop("sigma_min")
        if meta["kind"] not in ("consistency", "meanflow"):
            raise ValueError(f"unknown kind {meta['kind']!r}")
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"student: {folder / 'config.json'} is not a CMT student config ({err})") from err
    if meta["kind"] == "meanflow":
        student: Student = meanflow_student(DigitsTeacher(teacher), init="diffusion")
    else:
        student = consistency_student(DigitsTeacher(teacher), init="diffusion", sigma_min=float(sigma_min))
    load_weights(student, folder / "student.safetensors", "student")
    return student.to(device), teacher, meta
