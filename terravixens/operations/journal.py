"""What an operation has done and has not done yet: its units of work (synth, each layer, each decommission step)
and the step inside the current one, so that a stop or an interrupt ends with one line saying where it stopped.
Kept by the Console (terravixens.operations.console); read by the command lines (`terravixens`, and
`terravixens-terraform`, the Terraform `bin/cdktf` runs)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field

from terravixens import runner


@dataclass
class Unit:
    """One unit of an operation's work being done: a layer, a decommission step. `note` is said next to it once done
    (e.g. "no changes")."""

    name: str
    note: str = ""


@dataclass
class Journal:
    """What an operation has done and what it has not done yet, unit by unit, for the one line an operator reads
    when it stops or is interrupted: `stopped at platform-prod (guard): done: synth, hypervisors; not done:
    platform-prod, gitops-prod`.

    An operation says which units it means to do (`expect`) and does each inside `with journal.unit(name)`: a unit
    is done only when its block ends normally. The console tells the journal each progress step (`saw`), so the line
    also says where inside the unit it stopped."""

    done: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    current: str | None = None
    step: str | None = None
    last: str | None = None  # the last progress step seen, "layer (step)", for operations that declare no units
    unknown: str | None = None  # why the current unit may or may not have happened (outcome_unknown)

    def expect(self, *units: str) -> None:
        self.pending += [name for name in units if name not in self.pending and name not in self.done]

    def next(self, *units: str) -> None:
        """`units` come before what is pending: work found inside the current unit (a deploy's scale-in steps, known
        once its layer is planned), to be done before the next layers."""
        self.pending[:0] = [name for name in units if name not in self.pending and name not in self.done]

    def replace(self, placeholder: str, *units: str) -> None:
        """`placeholder` (work whose units are known only later, e.g. which nodes are still to reset) becomes
        `units`, in its place."""
        at = self.pending.index(placeholder) if placeholder in self.pending else len(self.pending)
        self.pending[at : at + (placeholder in self.pending)] = [name for name in units if name not in self.done]

    @contextlib.contextmanager
    def unit(self, name: str) -> Iterator[Unit]:
        self.current, self.step, self.unknown = name, None, None
        if name in self.pending:
            self.pending.remove(name)
        entry = Unit(name)
        yield entry  # an exception here leaves the unit current: not done (or not known, see outcome_unknown)
        self.done.append(f"{name} ({entry.note})" if entry.note else name)
        self.current = self.step = None

    def did(self, *units: str) -> None:
        """`units` are done, outside a `with unit()` block: work that ends together or in part (an upgrade's batch of
        workers, of which some may be upgraded and others not)."""
        for name in units:
            if name in self.pending:
                self.pending.remove(name)
            self.done.append(name)

    def outcome_unknown(self, why: str) -> None:
        """The current unit may have happened or not: its call hung or was stopped after it was sent (an etcd member
        removal that reached etcd, or not). A stop now counts it apart, neither done nor not done, with `why` (what
        to check before running again)."""
        self.unknown = why

    def saw(self, layer: str, step: str) -> None:
        self.step, self.last = step, f"{layer} ({step})"

    @property
    def started(self) -> bool:
        return bool(self.done or self.pending or self.current)

    def line(self, interrupted: bool) -> str | None:
        """`interrupted|stopped at <where>: done: …; [not known: <unit> (<why>); ]not done: …`; None when the
        operation had not started (its error message says it all: nothing was done)."""
        head = "interrupted" if interrupted else "stopped"
        if not self.started:
            if self.last is None:
                return None
            return f"{head} at {self.last}: done: what the lines above report; not done: the steps after it"
        where = self.current or (self.pending[0] if self.pending else "the end")
        if self.current and self.step and self.step != self.current:
            where += f" ({self.step})"
        unknown = f"not known: {self.current} ({self.unknown}); " if self.current and self.unknown else ""
        not_done = ([self.current] if self.current and not unknown else []) + self.pending
        return (
            f"{head} at {where}: done: {', '.join(self.done) or 'nothing'}; {unknown}"
            f"not done: {', '.join(not_done) or 'nothing'}"
        )


def interrupted_line(error: BaseException, journal: Journal) -> str:
    """One line for an interrupt: which signal, which external command was stopped with its process group
    (terravixens.runner), and what is done and not — the operation's own summary when it made one (an `upgrade`
    annotates its interrupt), else its journal, else the runner's line:
    `interrupted by SIGTERM (terraform plan stopped with its process group) at hypervisors (plan): done: synth; not
    done: hypervisors`."""
    line = journal.line(interrupted=True)
    if getattr(error, "summary", None) or not line:
        return runner.interrupted_line(error)
    stopped = getattr(error, "stopped", ())
    how = f" by {getattr(error, 'signal', 'SIGINT')}" + (
        f" ({', '.join(stopped)} stopped with its process group)" if stopped else ""
    )
    return line.replace("interrupted", f"interrupted{how}", 1)
