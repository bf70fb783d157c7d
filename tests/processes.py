"""Checks that processes a test made hang are really gone (the runner ended their whole process group)."""

from __future__ import annotations

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
