"""`backups`: the cluster's newest offsite etcd backup (clusters.<name>.etcd_backup, ADR 0059) is younger than two runs
of its schedule — the job ran, at the latest, the time before last. Read from the bucket with the secrets file's
etcd_backup.<cluster> (terravixens.operations.observe); no etcd_backup in the site: not judged (`applies`)."""

from __future__ import annotations

from datetime import UTC

from terravixens.config import cron
from terravixens.config.etcd_backup import JOB_NAME
from terravixens.etcd_offsite import age_of
from terravixens.operations.acceptance.base import (
    CheckProblem,
    CheckResult,
    Context,
    Status,
    not_checked,
    plural,
    verdict,
)
from terravixens.operations.observe import Observed, Unread

NAME = "backups"


def applies(context: Context) -> bool:
    """Judged only for a cluster whose site has etcd_backup (terravixens.operations.acceptance.judge)."""
    return context.cluster.etcd_backup is not None


def check(context: Context, observed: Observed) -> CheckResult:
    backup = context.cluster.etcd_backup
    if backup is None:
        return CheckResult(NAME, Status.OK, "no etcd_backup in the site: the snapshots are the operator's (snapshot)")
    found = observed.backups
    if isinstance(found, Unread):
        return not_checked(NAME, found)
    if found is None:  # not read although the site has one: observe() reads it whenever it does
        return not_checked(NAME, Unread("list the offsite backups", "not read"))
    location = f"s3://{backup.bucket}/{backup.key_prefix(context.cluster_name)}/"
    namespace = backup.namespace
    fix = (
        f"see why the job does not run or fails: kubectl -n {namespace} get cronjob,jobs (and kubectl -n {namespace} "
        f"logs job/NAME -c backup); take one now: kubectl -n {namespace} create job --from=cronjob/{JOB_NAME} "
        f"{JOB_NAME}-now"
    )
    now = context.now.astimezone(UTC)
    latest, before = cron.parse(backup.schedule).previous(now.replace(tzinfo=None), 2)
    due = before.replace(tzinfo=UTC)
    if not found:
        return verdict(
            NAME,
            [CheckProblem(f"no backup in {location} yet (the job writes one per run of {backup.schedule!r})", fix)],
            "",
        )
    newest = found[-1]
    age = age_of(newest, now)
    if newest.modified < due:
        what = (
            f"the newest backup in {location} is {age} old (uploaded {newest.modified:%Y-%m-%d %H:%M} UTC): older than "
            f"two runs of {backup.schedule!r} (due {before:%Y-%m-%d %H:%M} and {latest:%Y-%m-%d %H:%M} UTC)"
        )
        return verdict(NAME, [CheckProblem(what, fix)], "")
    return verdict(
        NAME,
        [],
        f"newest {age} old ({plural(len(found), 'backup')} in {location}; schedule {backup.schedule!r}, keep "
        f"{backup.keep})",
    )


__all__ = ["NAME", "applies", "check"]
