"""Ctrl-C inside a run, for resume tests: `ctrl_c_at` makes a function raise KeyboardInterrupt at its n-th call."""

from __future__ import annotations

from typing import Any

import pytest

__all__ = ["ctrl_c_at"]


def ctrl_c_at(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, call: int) -> None:
    """Patch `owner.name` (a module's function or a class's method) through `monkeypatch` so that its `call`-th call
    raises KeyboardInterrupt, as Ctrl-C would there, and every other call runs the real one."""
    if call < 1:
        raise ValueError(f"call: expected a call number >= 1, got {call}")
    real, calls = getattr(owner, name), []

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        calls.append(None)
        if len(calls) == call:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, interrupted)
