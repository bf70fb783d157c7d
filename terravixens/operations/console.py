"""Progress lines and confirmations. Tests give `answers`; without a terminal and without answers nothing is
confirmed (an unattended run must say --yes).

The console also keeps the operation's journal (terravixens.operations.journal.Journal): each progress step it prints
is where the operation is, and the command line reads the journal when the operation stops or is interrupted."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TextIO

from terravixens.operations.journal import Journal


@dataclass
class Console:
    out: TextIO = field(default_factory=lambda: sys.stdout)
    answers: Iterator[str] | None = None
    started: float = field(default_factory=time.monotonic)
    journal: Journal = field(default_factory=Journal)

    def say(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    def step(self, layer: str, step: str, text: str = "") -> None:
        self.journal.saw(layer, step)
        elapsed = time.monotonic() - self.started
        self.say(f"[{elapsed:6.1f}s] {layer}: {step}{' — ' + text if text else ''}")

    def ask(self, prompt: str) -> str | None:
        if self.answers is not None:
            answer = next(self.answers, None)
            self.say(f"{prompt}{answer if answer is not None else ''}")
            return answer
        if not sys.stdin.isatty():
            return None
        try:
            return input(prompt)
        except EOFError:
            return None
