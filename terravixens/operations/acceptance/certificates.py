"""`certificates`: the client certificates of the talosconfig and the kubeconfig the check used do not expire within
30 days (read with the standard library: terravixens.operations.observe.not_after)."""

from __future__ import annotations

from datetime import timedelta

from terravixens.operations.acceptance.base import CheckProblem, CheckResult, Context, not_checked, verdict
from terravixens.operations.observe import Observed, Unread

NAME = "certificates"
WARN_WITHIN = timedelta(days=30)


def _fix(source: str, context: Context) -> str:
    renew = f"bin/terravixens renew-credentials {context.cluster_name}"
    if source.startswith("talosconfig"):
        return (
            f"{renew} (the talos provider re-issues it in its last month; ADR 0056), or now, while this one works: "
            f"`talosctl config new --roles os:admin FILE`"
        )
    return f"{renew}: a new admin kubeconfig, nothing else of the cluster changed (ADR 0056)"


def check(context: Context, observed: Observed) -> CheckResult:
    found = observed.certificates
    if isinstance(found, Unread):
        return not_checked(NAME, found)
    if not found:
        return not_checked(NAME, Unread("read the client certificates", "no talosconfig or kubeconfig with one"))
    problems, valid = [], []
    for certificate in found:
        if certificate.not_after is None:
            problems.append(
                CheckProblem(f"{certificate.source}: {certificate.problem}", _fix(certificate.source, context))
            )
            continue
        date = certificate.not_after.strftime("%Y-%m-%d")
        left = certificate.not_after - context.now
        if left <= timedelta(0):
            problems.append(
                CheckProblem(
                    f"{certificate.source}: client certificate expired on {date}", _fix(certificate.source, context)
                )
            )
        elif left <= WARN_WITHIN:
            problems.append(
                CheckProblem(
                    f"{certificate.source}: client certificate expires on {date} (in {left.days} days)",
                    _fix(certificate.source, context),
                )
            )
        else:
            valid.append(f"{certificate.source} until {date} ({left.days} days)")
    return verdict(NAME, problems, "valid for more than 30 days: " + ", ".join(valid))
