"""A change a section plans: a line that says what it does and a step that does it (sections.py, network.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

Step = Callable[[], str | None]


@dataclass(frozen=True)
class Change:
    text: str
    step: Step  # None: done; else why not (one line)
    refused: str | None = None  # known when planned: never run, the section fails with this line (dry run too)


def fail(message: str) -> Step:
    return lambda: message


def refused(text: str, why: str) -> Change:
    return Change(text, fail(why), why)
