"""What a check is and what it says: `ok`, `problem` (each with what is wrong and what to do) or `not checked` (why
it could not look). A check is a pure function of what the site says (`Context`) and what was read
(terravixens.operations.observe.Observed): it calls nothing, so each is tested on values."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from terravixens.config.model import Cluster
from terravixens.operations.observe import Observed, SiteNode, Unread


class Status(StrEnum):
    OK = "ok"
    PROBLEM = "problem"
    NOT_CHECKED = "not checked"


@dataclass(frozen=True)
class CheckProblem:
    """One thing a check found wrong on the cluster, and its fix (not terravixens.inputs.Problem: a site file's)."""

    what: str
    fix: str


@dataclass(frozen=True)
class CheckResult:
    """One check's verdict. `summary`: what was seen (ok), or why it could not look (not checked); `problems`: one
    per thing wrong, each with its fix; `unread`: what it could not read besides (said, never hidden)."""

    check: str
    status: Status
    summary: str
    problems: tuple[CheckProblem, ...] = ()

    def lines(self) -> list[str]:
        if self.status is Status.PROBLEM:
            return [f"{self.check}: problem — {p.what}: {p.fix}" for p in self.problems] + (
                [f"{self.check}: problem — also: {self.summary}"] if self.summary else []
            )
        return [f"{self.check}: {self.status} — {self.summary}"]


@dataclass(frozen=True)
class Context:
    """What the site says about the cluster being checked, and the time the check judges at; `platform` and
    `gitops`: the names of the cluster's layers, for the fixes the checks print (`terravixens deploy LAYER`)."""

    cluster_name: str
    cluster: Cluster
    now: datetime
    platform: str
    gitops: str


AcceptanceCheck = Callable[[Context, Observed], CheckResult]


def not_checked(check: str, unread: Unread) -> CheckResult:
    return CheckResult(check, Status.NOT_CHECKED, str(unread))


def verdict(check: str, problems: list[CheckProblem], ok: str, unread: list[str] | None = None) -> CheckResult:
    """Problems win (what could not be read is said after them); else not checked when something could not be read;
    else ok."""
    rest = "not read: " + "; ".join(dict.fromkeys(unread)) if unread else ""
    if problems:
        return CheckResult(check, Status.PROBLEM, rest, tuple(problems))
    if unread:
        return CheckResult(check, Status.NOT_CHECKED, rest)
    return CheckResult(check, Status.OK, ok)


def plural(count: int, word: str, many: str | None = None) -> str:
    return f"{count} {word if count == 1 else many or word + 's'}"


def where(node: SiteNode) -> str:
    return f"{node.hostname} ({node.address})"


__all__ = [
    "AcceptanceCheck",
    "CheckProblem",
    "CheckResult",
    "Context",
    "Status",
    "not_checked",
    "plural",
    "verdict",
    "where",
]
