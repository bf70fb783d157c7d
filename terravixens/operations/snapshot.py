"""`terravixens snapshot CLUSTER`: one etcd snapshot, now, through a healthy control plane — the same step every
risky command takes automatically (terravixens.operations.etcd.fresh_snapshot, docs/adr/0036-etcd-snapshot-policy.md):
taken with `talosctl etcd snapshot`, verified (size, etcd's digest, bbolt's meta pages, and etcd's own checks when
the etcd-snapshot tool is built), kept 0600 in etcd-snapshots/<site>/<cluster>/ with its manifest, retention applied
(--keep, default 10 verified snapshots per cluster; one without a manifest is never removed, it is listed).

`terravixens snapshot CLUSTER --list`: the kept snapshots, oldest first, with time, node, reason, size and what
vouches for them (their manifest, and the file still hashing to the sha256 it recorded); reads files only, runs
nothing.

A snapshot folder that is a symbolic link (or not the user's), or a manifest the strict reader refuses (nested, huge,
not JSON), is BAD_INPUT in one line, for `--list` and before anything runs for a snapshot (no synth, no talosctl).

The talosconfig is the operator's (--talosconfig) or the platform layer's output (the site is synthesized and the
layer initialised first, the output written privately and removed afterwards). Nothing in the cluster changes.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from terravixens.arguments import Definition, backup_secrets_option, json_option, site_option, talosctl_options, whole
from terravixens.etcd_offsite import OffsiteError, RemoteBackup, age_of, endpoint_host, list_backups
from terravixens.etcd_snapshots import DEFAULT_KEEP, Snapshot, SnapshotStore, StoreError, describe
from terravixens.exitcodes import SYNTH_RULE, ExitCode, codes
from terravixens.operations.console import Console
from terravixens.operations.etcd import SnapshotPolicy, check_store, fresh_snapshot, platform_talosconfig
from terravixens.operations.offsite import configured, offsite
from terravixens.operations.outcome import OperationError
from terravixens.operations.terraform import Terraform
from terravixens.operations.workspace import Workspace
from terravixens.output import render
from terravixens.talosctl import Talosctl

SNAPSHOT_TIMEOUT = 5 * 60  # a snapshot of a few hundred MB streams in seconds; gigabytes need more (--timeout)
REASON = "manual"


@dataclass(frozen=True)
class SnapshotOptions:
    """`keep`: retention per cluster; `talosconfig`: the operator's file (None: the platform layer's output);
    `talosctl`: the binary and the deadline of each call."""

    keep: int = DEFAULT_KEEP
    talosconfig: str | None = None
    talosctl: Talosctl = field(default_factory=lambda: Talosctl(timeout=SNAPSHOT_TIMEOUT))


def _known(ws: Workspace, cluster_name: str) -> None:
    if cluster_name not in ws.site.clusters:
        raise OperationError(
            f"unknown cluster {cluster_name!r}: use one of {', '.join(sorted(ws.site.clusters))}", ExitCode.BAD_INPUT
        )


def _shown(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def take_snapshot(
    ws: Workspace, cluster_name: str, tf: Terraform, options: SnapshotOptions, console: Console | None = None
) -> int:
    """One verified snapshot, kept; BACKUP_FAILED (raised) when no control plane gives one."""
    console = console or Console()
    _known(ws, cluster_name)
    check_store(SnapshotStore(ws.root, ws.site.site, keep=options.keep), cluster_name)  # before synth and talosctl
    layer = ws.platform_layer(cluster_name).name
    journal = console.journal
    if options.talosconfig is None:
        journal.expect("synth", "talosconfig", "snapshot")
        with journal.unit("synth"):  # the platform layer's working directory, to read its talosconfig output
            console.step("site", "synth", ws.site.site)
            ws.synth()
    else:
        journal.expect("snapshot")
    with platform_talosconfig(ws, tf, console, cluster_name, options.talosconfig) as talosconfig:
        talosctl = replace(options.talosctl, talosconfig=talosconfig)
        with journal.unit("snapshot") as unit:
            try:
                taken = fresh_snapshot(
                    ws,
                    cluster_name,
                    talosctl,
                    console,
                    REASON,
                    SnapshotPolicy(keep=options.keep),
                    purpose="on request",
                )
            except OperationError as error:
                if error.code != ExitCode.BACKUP_FAILED:
                    raise
                tried = len(ws.site.clusters[cluster_name].control_planes)
                raise OperationError(
                    f"{layer}: no verified etcd snapshot of {cluster_name} ({tried} control plane"
                    f"{'s' if tried != 1 else ''} tried, each said why above); nothing was kept",
                    ExitCode.BACKUP_FAILED,
                ) from None
            if taken is None:  # only a policy with a skip reason gives none; this one has none (no assert: -O)
                raise OperationError(f"{layer}: the snapshot step skipped a snapshot asked for", ExitCode.FAILED)
            where = _shown(taken.snapshot.path, ws.root)
            unit.note = where
    verification = taken.verification
    console.say(f"snapshot: {where}")
    console.say(verification.summary().split(": ", 1)[1])
    console.say(f"retention (--keep {options.keep}): {describe(taken.pruned, removed_names=True)}")
    return ExitCode.OK


def _verified(snapshot: Snapshot) -> tuple[str, str]:
    """(what vouches for a kept snapshot — "etcd": its manifest records etcd's own checks, "sha256": size, digest
    and bbolt meta without the etcd-snapshot tool, "no" —, and why not when "no"). The manifest, and the file hashed
    again against the sha256 it recorded (a corrupted snapshot is not "verified" because its manifest says so); not
    etcd's checks again (retention runs those before it deletes anything, restore-etcd on the file it is given)."""
    manifest = snapshot.manifest
    if manifest is None:
        return "no", "no manifest: not kept by terravixens, or cut off before its manifest was written"
    try:
        size = snapshot.path.stat().st_size
        if size != manifest.get("size"):
            return "no", f"{size} bytes where its manifest says {manifest.get('size')}: the file changed"
        digest = hashlib.sha256()
        with snapshot.path.open("rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
    except OSError as error:
        return "no", f"cannot read it ({error.strerror})"
    if digest.hexdigest() != manifest.get("sha256"):
        return "no", f"sha256 {digest.hexdigest()[:12]}… is not the one its manifest recorded: the file changed"
    return ("etcd" if (manifest.get("verification") or {}).get("level") == "etcd" else "sha256"), ""


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[column]) for row in rows) + 3 for column in range(len(rows[0]) - 1)]
    return [
        ("".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)) + row[-1]).rstrip()
        for row in rows
    ]


@dataclass(frozen=True)
class RemoteList:
    """The offsite backups of the cluster (ADR 0059), or why they were not read (`unread`)."""

    location: str  # s3://BUCKET/PREFIX/
    endpoint: str
    backups: tuple[RemoteBackup, ...] = ()
    unread: str | None = None
    now: datetime = field(default_factory=lambda: datetime.now(UTC))

    def lines(self) -> list[str]:
        if self.unread is not None:
            return [f"offsite {self.location}: not listed — {self.unread}"]
        count = len(self.backups)
        if not count:
            return [f"offsite {self.location} ({self.endpoint}): no backup yet (the job writes one per schedule)"]
        rows = [["UPLOADED (UTC)", "AGE", "SIZE", "BACKUP"]]
        for backup in self.backups:
            rows.append([_utc(backup.modified), age_of(backup, self.now), _bytes(backup.size), backup.url])
        head = f"offsite {self.location} ({self.endpoint}): {count} backup{'s' if count != 1 else ''}, oldest first"
        return [head, *_table(rows)]

    def body(self) -> dict[str, object]:
        return {
            "location": self.location,
            "endpoint": self.endpoint,
            "not_listed_because": self.unread,
            "backups": [
                {
                    "url": backup.url,
                    "uploaded_at": backup.modified.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "size": backup.size,
                }
                for backup in self.backups
            ],
        }


@dataclass(frozen=True)
class SnapshotList:
    """`snapshot --list`: the cluster's kept snapshots, oldest first, and what vouches for each (a value:
    terravixens.output renders it as the table or as the `terravixens/snapshot-list/v1` document)."""

    site: str
    cluster: str
    folder: str
    snapshots: tuple[Snapshot, ...]
    remote: RemoteList | None = None
    command: str = "snapshot list"
    exit_code: int = ExitCode.OK

    @functools.cached_property
    def _vouched(self) -> dict[Path, tuple[str, str]]:
        """What vouches for each snapshot, judged once (each file is hashed): the table and the document agree."""
        return {snapshot.path: _verified(snapshot) for snapshot in self.snapshots}

    def vouched(self, snapshot: Snapshot) -> tuple[str, str]:
        return self._vouched[snapshot.path]

    def lines(self) -> list[str]:
        return self._local() + (self.remote.lines() if self.remote is not None else [])

    def _local(self) -> list[str]:
        count = len(self.snapshots)
        if not count:
            return [f"no snapshot of {self.cluster} in {self.folder}/ (take one: terravixens snapshot {self.cluster})"]
        rows = [["TAKEN (UTC)", "NODE", "REASON", "SIZE", "VERIFIED", "FILE"]]
        notes = []
        for snapshot in self.snapshots:
            verified, why = self.vouched(snapshot)
            rows.append(
                [_utc(snapshot.taken_at), snapshot.node, snapshot.reason, _size(snapshot), verified, snapshot.path.name]
            )
            if why:
                notes.append(f"{snapshot.path.name}: not verified: {why}")
        return [f"{self.folder}/: {count} snapshot{'s' if count != 1 else ''}, oldest first", *_table(rows), *notes]

    def notes(self) -> list[str]:
        return []

    def body(self) -> dict[str, object]:
        snapshots = []
        for snapshot in self.snapshots:
            verified, why = self.vouched(snapshot)
            try:
                size: int | None = snapshot.path.stat().st_size
            except OSError:
                size = None
            snapshots.append(
                {
                    "file": f"{self.folder}/{snapshot.path.name}",
                    "taken_at": snapshot.taken_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "node": snapshot.node,
                    "reason": snapshot.reason,
                    "size": size,
                    "verified": verified,
                    "not_verified_because": why or None,
                    "sha256": snapshot.sha256,
                }
            )
        body: dict[str, object] = {
            "site": self.site,
            "cluster": self.cluster,
            "folder": self.folder,
            "snapshots": snapshots,
        }
        if self.remote is not None:
            body["remote"] = self.remote.body()
        return body


def remote_list(ws: Workspace, cluster_name: str, secrets: str | None) -> RemoteList | None:
    """The offsite backups, when the site has some for the cluster; what stops the listing is said, not raised: the
    local snapshots are listed whatever the bucket does."""
    backup = ws.site.clusters[cluster_name].etcd_backup if configured(ws.site, cluster_name) else None
    if backup is None:
        return None
    location = f"s3://{backup.bucket}/{backup.key_prefix(cluster_name)}/"
    host = endpoint_host(backup.endpoint)
    try:
        found = offsite(ws.site, cluster_name, secrets)
        return RemoteList(location, host, tuple(list_backups(found.bucket, cluster_name)))
    except OperationError as error:
        return RemoteList(location, host, unread=str(error))
    except OffsiteError as error:
        return RemoteList(location, host, unread=str(error))


def snapshot_list(ws: Workspace, cluster_name: str, secrets: str | None = None) -> SnapshotList:
    """The cluster's kept snapshots, and its offsite backups when the site has some; reads the store (and the
    bucket) only."""
    _known(ws, cluster_name)
    store = SnapshotStore(ws.root, ws.site.site)
    folder = _shown(store.folder(cluster_name), ws.root)
    try:
        snapshots = store.snapshots(cluster_name)
    except StoreError as error:
        raise OperationError(str(error), ExitCode.BAD_INPUT) from None
    return SnapshotList(ws.site.site, cluster_name, folder, tuple(snapshots), remote_list(ws, cluster_name, secrets))


def list_snapshots(ws: Workspace, cluster_name: str, console: Console | None = None, secrets: str | None = None) -> int:
    """The cluster's kept snapshots, oldest first, printed on the console."""
    console = console or Console()
    report = snapshot_list(ws, cluster_name, secrets)
    for line in report.lines():
        console.say(line)
    return report.exit_code


def _size(snapshot: Snapshot) -> str:
    try:
        size = snapshot.path.stat().st_size
    except OSError:
        return "?"
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"


def _utc(when: datetime) -> str:
    return when.strftime("%Y-%m-%d %H:%M:%S")


def _bytes(size: int) -> str:
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"


# ------------------------------------------------------------------------------------------------- command line
def arguments(parser: argparse.ArgumentParser) -> None:
    site_option(parser)
    parser.add_argument("cluster")
    parser.add_argument(
        "--list", action="store_true", help="list the kept snapshots (time, node, reason, size, verified); runs nothing"
    )
    json_option(parser, " with --list (terravixens/snapshot-list/v1)")
    backup_secrets_option(parser)
    parser.add_argument(
        "--keep",
        type=whole(1, "number of snapshots to keep", "the new one is always kept"),
        metavar="N",
        help="retention: keep the newest N verified snapshots of the cluster (default 10; unverified ones are never "
        "removed)",
    )
    talosctl_options(parser, "5m", " (the snapshot's stream)")


def command(args: argparse.Namespace, ws: Workspace, tf: Terraform, console: Console) -> int:
    if args.list:
        if args.keep is not None:
            raise OperationError("--keep applies when a snapshot is taken; --list only lists", ExitCode.BAD_INPUT)
        return render(snapshot_list(ws, args.cluster, args.backup_secrets), args.json)
    if args.json:
        raise OperationError("--json goes with --list (a snapshot being taken prints its progress)", ExitCode.BAD_INPUT)
    options = SnapshotOptions(
        keep=DEFAULT_KEEP if args.keep is None else args.keep,
        talosconfig=args.talosconfig,
        talosctl=Talosctl(args.talosctl, timeout=args.timeout),
    )
    return take_snapshot(ws, args.cluster, tf, options, console)


SNAPSHOT = Definition(
    arguments,
    command,
    codes(
        (ExitCode.OK, "the snapshot is kept (its path, verification and what retention removed printed), or the list"),
        (ExitCode.REFUSED, SYNTH_RULE),
        (
            ExitCode.BAD_INPUT,
            (
                "site file, unknown cluster, bad option, no talosconfig output (give --talosconfig), a snapshot folder "
                "that is a link (or not yours) or a manifest the strict reader refuses (said before any talosctl call)"
            ),
        ),
        (ExitCode.FAILED, "synth or terraform init (to read the talosconfig output) failed"),
        (
            ExitCode.BACKUP_FAILED,
            "no control plane gave a snapshot that verifies (each one's reason printed); nothing was kept",
        ),
        ExitCode.INTERRUPTED,
    ),
    examples=(
        "terravixens snapshot prod",
        "terravixens snapshot prod --list --json",
        "terravixens snapshot prod --keep 20 --talosconfig ./talosconfig",
    ),
)


__all__ = [
    "SNAPSHOT",
    "SnapshotList",
    "SnapshotOptions",
    "arguments",
    "command",
    "list_snapshots",
    "snapshot_list",
    "take_snapshot",
]
