"""Processes tests make hang: a hanging tool (tests/fake_hang.py) to put on PATH, the pid a program wrote, and checks
that they are really gone (the runner ended their whole process group)."""

from __future__ import annotations

import sys
import time
from pathlib import Path


def ends_soon(pid: int, within: float = 5.0) -> bool:
    """The process is gone (or a zombie, waiting for its reaper) within `within` seconds: SIGKILL is delivered
    asynchronously, and an orphan is reaped by init in its own time."""
    status = Path(f"/proc/{pid}/status")
    until = time.monotonic() + within
    while True:
        try:
            if "\nState:\tZ" in status.read_text():
                return True
        except (FileNotFoundError, ProcessLookupError):
            return True
        if time.monotonic() > until:
            return False
        time.sleep(0.05)


def recorded(path: Path) -> list[int]:
    """The pids a fake wrote down when it hung (its own and its children's), one or more per line."""
    return [int(pid) for pid in path.read_text().split()] if path.exists() else []


def all_gone(pids: list[int]) -> bool:
    return bool(pids) and all(ends_soon(pid) for pid in pids)


HANG = Path(__file__).resolve().parent / "fake_hang.py"


def hanging_tool(folder: Path, name: str) -> Path:
    """A program `name` in `folder` that is tests/fake_hang.py (it hangs on $FAKE_HANG_ON, holding its pipes through
    a child, and writes their pids to $FAKE_HANG_DIR/hung)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f'#!/bin/sh\nexec {sys.executable} {HANG} "$@"\n')
    path.chmod(0o755)
    return path


def pid_in(path: Path, within: float = 10) -> int:
    """The first pid a program wrote to `path`, once it is there (a test's sign that the program runs)."""
    until = time.monotonic() + within
    while not path.exists() or not path.read_text().strip():
        assert time.monotonic() < until, f"{path} never written"
        time.sleep(0.02)
    return int(path.read_text().split()[0])
