"""`terravixens restore-etcd CLUSTER --from FILE`: Talos' documented etcd disaster recovery, guarded.

When etcd has lost quorum for good, Talos' procedure (disaster-recovery, 1.11-1.13) is: wipe etcd's data on every
control plane, wait until each one's etcd waits to be bootstrapped, bootstrap ONE of them from a snapshot; the
others join it. This command runs exactly that, and refuses what would make it worse:

1. FILE is verified first (terravixens.etcd_snapshots.verify_snapshot: size, etcd's digest, bbolt's meta pages,
   etcd's own checks with the etcd-snapshot tool). A file without etcd's digest (a `db` copied out of a data
   directory) is refused unless --skip-hash-check says so; it is then read by the same checks through a private
   copy given a digest, and restored with `--recover-skip-hash-check`, said loudly. A snapshot whose name or
   manifest says it is another cluster's, or whose manifest records another file, is refused (BAD_INPUT).
2. etcd is looked at: `talosctl service etcd` on every control plane and `talosctl etcd members` (which needs a
   leader). When a control plane lists members, etcd works: restoring over it loses every write since the
   snapshot, so this refuses (REFUSED) unless --force — and then a fresh snapshot of the etcd that answers is taken
   first (BACKUP_FAILED when none can be; --no-snapshot REASON skips it).
3. the typed confirmation SITE/CLUSTER (or --confirm);
4. per control plane, by name, one at a time: `talosctl reset --graceful=false --reboot
   --system-labels-to-wipe=EPHEMERAL --wait --timeout T` (EPHEMERAL holds /var/lib/etcd; STATE, the machine
   configuration, stays);
5. `talosctl service etcd` polled (every --poll, until --timeout) until etcd is Preparing on every control plane;
6. `talosctl bootstrap --recover-from=FILE` on the site's bootstrap node (cluster.bootstrap);
7. `talosctl health` (bounded by --timeout).

Every talosctl call goes through the bounded runner. The steps are the units of the console's journal: a stop or an
interrupt says in one line what is done and what is not; a reset or a bootstrap whose call hung or was stopped is
"not known", with what to check. Running the same command again is the way on: the guard sees etcd down and
resets every control plane again (harmless for a node already wiped).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from terravixens.arguments import Definition, duration, no_snapshot_option, site_option, talosctl_options
from terravixens.config.addressing import node_address
from terravixens.etcd_snapshots import (
    DIGEST_SIZE,
    SECTOR,
    SnapshotStore,
    Verification,
    manifest_path,
    parse_name,
    verify_snapshot,
)
from terravixens.exitcodes import SYNTH_RULE, ExitCode, codes
from terravixens.layers import platform_stack_name
from terravixens.operations.console import Console
from terravixens.operations.etcd import SnapshotPolicy, fresh_snapshot, platform_talosconfig
from terravixens.operations.files import private_directory
from terravixens.operations.journal import Journal
from terravixens.operations.outcome import OperationError
from terravixens.operations.steps import typed_confirmation
from terravixens.operations.terraform import Terraform
from terravixens.operations.workspace import Workspace
from terravixens.talosctl import Call, ServiceState, Talosctl, members, service_states

VERIFY, SYNTH, TALOSCONFIG, CHECK, CONFIRM, SNAPSHOT, PREPARING, HEALTH = (
    "verify",
    "synth",
    "talosconfig",
    "etcd check",
    "confirmation",
    "snapshot",
    "etcd Preparing",
    "health",
)
POLL_DEADLINE = 60  # one `service etcd` poll: a node that does not answer within this is said so, then polled again
RESET_UNKNOWN = (
    "list its etcd state (talosctl service etcd) and run the same command again: a reset node is reset again"
)
BOOTSTRAP_UNKNOWN = (
    "look at etcd on it (talosctl service etcd): Running means the restore was accepted — do not bootstrap again; "
    "Preparing means it was not: run the same command again"
)


@dataclass(frozen=True)
class RestoreOptions:
    """`source`: the snapshot (--from); `skip_hash_check`: it is a data directory's `db` copy, without etcd's digest;
    `force`: restore even though etcd answers (a fresh snapshot of it is taken first, per `snapshot`);
    `talosconfig`: the operator's file (None: the platform layer's output); `timeout`: the bound of the wait for
    Preparing (each talosctl call has the talosctl's own); `poll`: seconds between `service etcd` calls."""

    source: Path
    confirm: str | None = None
    force: bool = False
    skip_hash_check: bool = False
    talosconfig: str | None = None
    snapshot: SnapshotPolicy = field(default_factory=SnapshotPolicy)
    timeout: float = 15 * 60
    poll: float = 5.0
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)
    clock: Callable[[], float] = field(default=time.monotonic, repr=False)


@dataclass(frozen=True)
class Source:
    """The verified snapshot: what bootstrap gets (`skip_hash_check` only for a digest-less copy) and one line."""

    path: Path
    shown: str
    skip_hash_check: bool
    verification: Verification
    origin: str  # what its name or manifest says: "taken 2025-… through cp-a (manual)", or ""


# ------------------------------------------------------------------------------------------------ the file
def _shown(path: Path, root: Path) -> str:
    with contextlib.suppress(ValueError):
        return str(path.resolve().relative_to(root))
    return str(path)


def _found(verification: Verification) -> str:
    if verification.level == "etcd":
        return f"etcd's own checks: revision {verification.revision}, {verification.total_keys} keys"
    return f"{', '.join(verification.passed)} ({verification.note})"


def check_source(ws: Workspace, cluster_name: str, path: Path, skip_hash_check: bool, console: Console) -> Source:
    """FILE verified as step 1 says; BAD_INPUT with the file, what is wrong and the way out when it is not usable."""
    layer = platform_stack_name(cluster_name)
    shown = _shown(path, ws.root)
    given = f"--from {shown}"
    try:
        size = path.stat().st_size
    except OSError as error:
        raise OperationError(
            f"{given}: cannot read it ({error.strerror}); nothing was done", ExitCode.BAD_INPUT
        ) from None
    if not path.is_file():
        raise OperationError(f"{given}: not a file; nothing was done", ExitCode.BAD_INPUT)
    origin = _origin(ws, cluster_name, path, given)
    if size % SECTOR == DIGEST_SIZE:
        verification = verify_snapshot(path)
        if not verification.ok:
            raise OperationError(
                f"{given}: not a usable etcd snapshot ({verification.check}): {verification.reason}; nothing was done",
                ExitCode.BAD_INPUT,
            )
        _matches_manifest(path, verification, given)
        console.step(
            layer, "verify", f"{shown}: {_found(verification)}, etcd's digest matches{origin and '; ' + origin}"
        )
        if skip_hash_check:
            console.step(
                layer, "verify", "it carries etcd's digest: restored with the hash check (--skip-hash-check not needed)"
            )
        return Source(path, shown, False, verification, origin)
    if not skip_hash_check:
        raise OperationError(
            f"{given}: {size} bytes, no etcd digest at its end (a snapshot from `talosctl etcd snapshot` or "
            f"`terravixens snapshot` is 512*k+32 bytes). If it is a `db` file copied out of an etcd data directory "
            f"(talosctl cp /var/lib/etcd/member/snap/db), pass --skip-hash-check: nothing can then prove it is the "
            f"database etcd wrote; nothing was done",
            ExitCode.BAD_INPUT,
        )
    verification = _verify_copy(path, size, given)
    console.step(
        layer,
        "verify",
        f"WARNING: {shown} has no etcd digest (--skip-hash-check): read by {_found(verification)}, but nothing proves "
        f"it is the database as etcd wrote it (a copy taken while etcd ran may lack its last writes); restored with "
        f"talosctl bootstrap --recover-skip-hash-check",
    )
    return Source(path, shown, True, verification, origin)


def _verify_copy(path: Path, size: int, given: str) -> Verification:
    """A `db` without digest, judged by the same checks: a private copy with the digest etcd would have appended."""
    if size == 0 or size % SECTOR:
        raise OperationError(
            f"{given}: {size} bytes is not whole pages: not a bbolt database (etcd's `db`); nothing was done",
            ExitCode.BAD_INPUT,
        )
    with private_directory("terravixens-db-copy-") as folder:
        copy = folder / "db.snapshot"
        digest = hashlib.sha256()
        with path.open("rb") as source, copy.open("wb") as target:
            while chunk := source.read(1 << 20):
                digest.update(chunk)
                target.write(chunk)
            target.write(digest.digest())
        verification = verify_snapshot(copy)
    if not verification.ok:
        raise OperationError(
            f"{given}: not a usable etcd database ({verification.check}): {verification.reason}; nothing was done",
            ExitCode.BAD_INPUT,
        )
    return verification


def _origin(ws: Workspace, cluster_name: str, path: Path, given: str) -> str:
    """What the file's name and manifest say (terravixens' store names them); another cluster's or site's is refused."""
    parsed = parse_name(path.name)
    if parsed is None:
        return ""
    cluster, taken_at, node, reason = parsed
    if cluster != cluster_name:
        raise OperationError(
            f"{given}: its name says it is a snapshot of cluster {cluster!r}, not of {cluster_name!r}: restoring "
            f"another cluster's etcd would give this one its objects and identities; nothing was done",
            ExitCode.BAD_INPUT,
        )
    manifest = _manifest(path)
    site = (manifest or {}).get("site")
    if site and site != ws.site.site:
        raise OperationError(
            f"{given}: its manifest says it is a snapshot of site {site!r}, not of {ws.site.site!r}; nothing was done",
            ExitCode.BAD_INPUT,
        )
    return f"taken {taken_at:%Y-%m-%d %H:%M:%S} UTC through {node} ({reason})"


def _manifest(path: Path) -> dict[str, Any] | None:
    try:
        manifest = json.loads(manifest_path(path).read_text())
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) and manifest.get("file") == path.name else None


def _matches_manifest(path: Path, verification: Verification, given: str) -> None:
    recorded = (_manifest(path) or {}).get("sha256")
    if recorded and recorded != verification.sha256:
        raise OperationError(
            f"{given}: sha256 {verification.sha256} is not the {recorded} its manifest recorded: the file was "
            f"replaced since it was kept; nothing was done",
            ExitCode.BAD_INPUT,
        )


# ------------------------------------------------------------------------------------------------ etcd now
@dataclass(frozen=True)
class Observed:
    """etcd as it is: each control plane's service block (absent: it did not answer), and the control plane that
    listed the members (None: no leader anywhere)."""

    services: dict[str, ServiceState]
    listed_through: str | None
    member_count: int


def _stopped(call: Call, what: str) -> OperationError | None:
    """A call that could not run at all (no talosctl, interrupted) is a stop; a failure of the node is an answer."""
    if call.returncode is None and not call.timed_out:
        return OperationError(f"{what}: {call.reason}", ExitCode.FAILED)
    return None


def _services(talosctl: Talosctl, addresses: dict[str, str], timeout: float) -> tuple[dict[str, ServiceState], Call]:
    answer = talosctl.service(list(addresses.values()), "etcd", deadline=min(POLL_DEADLINE, timeout))
    stopped = _stopped(answer, "talosctl service etcd")
    if stopped:
        raise stopped
    by_address = service_states(answer.stdout)
    return {name: by_address[address] for name, address in addresses.items() if address in by_address}, answer


def observe(talosctl: Talosctl, addresses: dict[str, str], console: Console, layer: str, timeout: float) -> Observed:
    services, answer = _services(talosctl, addresses, timeout)
    for name, address in addresses.items():
        found = services.get(name)
        console.step(
            layer,
            "etcd",
            f"{name} ({address}): "
            + (
                f"etcd {found.state}, health {found.health}" + (f", {found.last_event}" if found.last_event else "")
                if found
                else f"no answer ({answer.reason[:160] or 'not in the output'})"
            ),
        )
    for name, address in addresses.items():
        listed = talosctl.etcd_members(address)
        stopped = _stopped(listed, "talosctl etcd members")
        if stopped:
            raise stopped
        if listed.ok:
            count = len(members(listed.stdout))
            console.step(layer, "etcd", f"{count} members listed through {name}: etcd has a leader")
            return Observed(services, name, count)
        console.step(layer, "etcd", f"{name} lists no members ({listed.reason[:300]})")
    return Observed(services, None, 0)


# ------------------------------------------------------------------------------------------------ the command
def restore_etcd(
    ws: Workspace,
    cluster_name: str,
    tf: Terraform,
    talosctl: Talosctl,
    options: RestoreOptions,
    console: Console | None = None,
) -> int:
    console = console or Console()
    cluster = ws.site.clusters.get(cluster_name)
    if cluster is None:
        raise OperationError(
            f"unknown cluster {cluster_name!r}: use one of {', '.join(sorted(ws.site.clusters))}", ExitCode.BAD_INPUT
        )
    addresses = {
        name: node_address(node.networks, cluster.management_vlan)
        for name, node in sorted(cluster.control_planes.items())
    }
    workers = [node_address(node.networks, cluster.management_vlan) for _, node in sorted(cluster.workers.items())]
    bootstrap = cluster.bootstrap
    journal = console.journal
    journal.expect(
        VERIFY,
        *([SYNTH, TALOSCONFIG] if options.talosconfig is None else []),
        CHECK,
        CONFIRM,
        *(f"reset {name}" for name in addresses),
        PREPARING,
        f"bootstrap {bootstrap}",
        HEALTH,
    )
    with journal.unit(VERIFY) as unit:
        source = check_source(ws, cluster_name, Path(options.source), options.skip_hash_check, console)
        unit.note = "no digest: --skip-hash-check" if source.skip_hash_check else "verified"
    if options.talosconfig is None:
        with journal.unit(SYNTH):  # the platform layer's working directory, to read its talosconfig output
            console.step("site", "synth", ws.site.site)
            ws.synth()
    with platform_talosconfig(ws, tf, console, cluster_name, options.talosconfig) as talosconfig:
        talosctl = replace(talosctl, talosconfig=talosconfig)
        _restore(ws, cluster_name, talosctl, options, console, source, addresses, workers)
    return ExitCode.OK


def _restore(
    ws: Workspace,
    cluster_name: str,
    talosctl: Talosctl,
    options: RestoreOptions,
    console: Console,
    source: Source,
    addresses: dict[str, str],
    workers: list[str],
) -> None:
    layer = platform_stack_name(cluster_name)
    bootstrap = ws.site.clusters[cluster_name].bootstrap
    journal = console.journal
    with journal.unit(CHECK) as unit:
        observed = observe(talosctl, addresses, console, layer, options.timeout)
        unit.note = f"answers through {observed.listed_through}" if observed.listed_through else "no leader"
    if observed.listed_through is not None:
        if not options.force:
            raise OperationError(
                f"etcd of {cluster_name} works: {observed.member_count} members listed through "
                f"{observed.listed_through}. Restoring {source.shown} over it loses every write since that snapshot "
                f"was taken. If some members are lost but quorum holds, remove them instead (terravixens "
                f"remove-dead-member); to restore anyway, pass --force (a fresh snapshot of this etcd is taken "
                f"first); nothing was done",
                ExitCode.REFUSED,
            )
        console.step(
            layer,
            "etcd",
            f"--force: etcd answers, and restoring {source.shown} loses every write since that snapshot was taken",
        )
        journal.replace(CONFIRM, CONFIRM, SNAPSHOT)

    with journal.unit(CONFIRM):
        typed_confirmation(
            console,
            f"{ws.site.site}/{cluster_name}",
            options.confirm,
            f"This resets {', '.join(addresses)} of cluster {cluster_name} (their EPHEMERAL partition, which holds "
            f"etcd's data, is wiped) and restores etcd from {source.shown} on {bootstrap}: every write to the "
            f"cluster after that snapshot is lost",
        )

    if observed.listed_through is not None:
        with journal.unit(SNAPSHOT) as unit:
            taken = fresh_snapshot(
                ws,
                cluster_name,
                talosctl,
                console,
                "restore-etcd",
                _keeping(ws, cluster_name, source, options.snapshot),
            )
            unit.note = _shown(taken.snapshot.path, ws.root) if taken else "skipped (--no-snapshot)"

    for name, address in addresses.items():
        with journal.unit(f"reset {name}"):
            console.step(
                layer,
                "reset",
                f"{name} ({address}): --graceful=false --reboot --system-labels-to-wipe=EPHEMERAL (waits until it is "
                f"back)",
            )
            answer = _changing(journal, RESET_UNKNOWN, partial(talosctl.reset_ephemeral, address))
            if not answer.ok:
                raise OperationError(
                    f"talosctl reset of {name} failed ({answer.reason}); "
                    + (
                        f"whether it was reset is not known: {RESET_UNKNOWN}"
                        if answer.timed_out or answer.interrupted
                        else "etcd is not restored: fix it and run the same command again"
                    ),
                    ExitCode.FAILED,
                )
            console.step(layer, "reset", f"{name}: back after its reset")

    with journal.unit(PREPARING) as unit:
        unit.note = _wait_preparing(talosctl, addresses, options, console, layer)

    with journal.unit(f"bootstrap {bootstrap}"):
        console.step(layer, "bootstrap", f"{bootstrap} ({addresses[bootstrap]}) --recover-from={source.shown}")
        answer = _changing(
            journal,
            BOOTSTRAP_UNKNOWN,
            partial(talosctl.bootstrap_recover, addresses[bootstrap], str(source.path), source.skip_hash_check),
        )
        for line in answer.stdout.splitlines():
            console.step(layer, "bootstrap", line.strip())
        if not answer.ok:
            unknown = answer.timed_out or answer.interrupted
            raise OperationError(
                f"talosctl bootstrap --recover-from on {bootstrap} failed ({answer.reason}); "
                + (
                    f"whether etcd was restored is not known: {BOOTSTRAP_UNKNOWN}"
                    if unknown
                    else "etcd is not restored; the control planes are reset and wait (Preparing): fix it and run "
                    "the same command again"
                ),
                ExitCode.FAILED,
            )

    with journal.unit(HEALTH):
        ordered = [addresses[bootstrap], *(address for name, address in addresses.items() if name != bootstrap)]
        console.step(layer, "health", f"talosctl health through {bootstrap} (control planes and workers)")
        health = talosctl.health(ordered, workers)
        if not health.ok:
            raise OperationError(
                f"etcd was restored from {source.shown} on {bootstrap} (bootstrap accepted), but talosctl health "
                f"failed ({health.reason}); look at talosctl service etcd and talosctl logs etcd on each control "
                f"plane, then run talosctl health again",
                ExitCode.FAILED,
            )
        console.step(layer, "health", "ok")
    console.say(
        f"restored etcd of {cluster_name} from {source.shown} ({_found(source.verification)}); next: "
        f"`terravixens deploy {layer}` (it should plan no change) and look at the workloads"
    )


def _changing(journal: Journal, why: str, call: Callable[[], Call]) -> Call:
    """Runs a call that changes a node; interrupted or past its deadline, its outcome is not known (said so, with
    `why`: what to check)."""
    try:
        answer = call()
    except KeyboardInterrupt:
        journal.outcome_unknown(why)
        raise
    if answer.timed_out or answer.interrupted:
        journal.outcome_unknown(why)
    return answer


def _keeping(ws: Workspace, cluster_name: str, source: Source, policy: SnapshotPolicy) -> SnapshotPolicy:
    """Retention must not remove the file about to be restored: keep enough for it to stay the newest-but-N."""
    store = SnapshotStore(ws.root, ws.site.site)
    verified = [snapshot.path.resolve() for snapshot in store.snapshots(cluster_name) if snapshot.verified]
    if source.path.resolve() not in verified:
        return policy
    newer = len(verified) - verified.index(source.path.resolve())  # the source and those after it
    return replace(policy, keep=max(policy.keep, newer + 1))


def _wait_preparing(
    talosctl: Talosctl, addresses: dict[str, str], options: RestoreOptions, console: Console, layer: str
) -> str:
    """`service etcd` every `poll` seconds until etcd is Preparing on every control plane, within `timeout`; only
    changes are printed. Running somewhere is a stop: that etcd was not wiped (bootstrapping now would split it)."""
    deadline = options.clock() + options.timeout
    seen: dict[str, str] = {}
    polls = 0
    while True:
        polls += 1
        services, answer = _services(talosctl, addresses, options.timeout)
        now = {name: services[name].state if name in services else "no answer" for name in addresses}
        for name, state in now.items():
            if seen.get(name) != state:
                event = services[name].last_event if name in services else answer.reason[:160]
                console.step(layer, "etcd", f"{name}: {state}" + (f" — {event}" if event else ""))
        seen = now
        running = [name for name, state in now.items() if state == "Running"]
        if running:
            raise OperationError(
                f"etcd is Running on {', '.join(running)} after its reset: its data was not wiped (or it joined "
                f"another etcd); bootstrapping now would split etcd in two. Look at talosctl service etcd and "
                f"talosctl logs etcd there; etcd is not restored",
                ExitCode.FAILED,
            )
        waiting = [name for name, state in now.items() if state != "Preparing"]
        if not waiting:
            return f"every control plane, after {polls} poll{'s' if polls != 1 else ''}"
        if options.clock() + options.poll > deadline:
            states = "; ".join(f"{name}: {now[name]}" for name in waiting)
            raise OperationError(
                f"etcd is not Preparing on {', '.join(waiting)} within {options.timeout:g}s ({states}); the control "
                f"planes are reset, etcd is not restored: look at talosctl service etcd there, then run the same "
                f"command again",
                ExitCode.FAILED,
            )
        options.sleep(options.poll)


# ------------------------------------------------------------------------------------------------- command line
def arguments(parser: argparse.ArgumentParser) -> None:
    site_option(parser)
    parser.add_argument("cluster")
    parser.add_argument(
        "--from",
        dest="source",
        required=True,
        metavar="FILE",
        help="the snapshot (etcd-snapshots/..., or any `talosctl etcd snapshot` file); verified first",
    )
    parser.add_argument(
        "--skip-hash-check",
        action="store_true",
        help="FILE is a `db` copied out of an etcd data directory, without etcd's digest: restored with talosctl "
        "bootstrap --recover-skip-hash-check (nothing proves it is intact)",
    )
    parser.add_argument("--confirm", metavar="SITE/CLUSTER", help="the typed confirmation, for unattended runs")
    parser.add_argument(
        "--force",
        action="store_true",
        help="restore even though etcd answers (every write since FILE is lost; a fresh snapshot of it is taken first)",
    )
    no_snapshot_option(parser, "with --force, before the resets")
    talosctl_options(parser, "15m", ", and of the wait for etcd to be Preparing")
    parser.add_argument(
        "--poll",
        type=duration,
        default="5s",
        metavar="DURATION",
        help="time between two `talosctl service etcd` while waiting for Preparing (default 5s)",
    )


def command(args: argparse.Namespace, ws: Workspace, tf: Terraform, console: Console) -> int:
    if args.no_snapshot is not None and not args.force:
        raise OperationError(
            "--no-snapshot goes with --force: only an etcd that still answers is snapshotted before it is "
            "restored over; nothing was done",
            ExitCode.BAD_INPUT,
        )
    options = RestoreOptions(
        source=Path(args.source),
        confirm=args.confirm,
        force=args.force,
        skip_hash_check=args.skip_hash_check,
        talosconfig=args.talosconfig,
        snapshot=SnapshotPolicy(skip_reason=args.no_snapshot),
        timeout=args.timeout,
        poll=args.poll,
    )
    return restore_etcd(ws, args.cluster, tf, Talosctl(args.talosctl, timeout=args.timeout), options, console)


RESTORE_ETCD = Definition(
    arguments,
    command,
    codes(
        (ExitCode.OK, "etcd restored on the bootstrap node, every control plane joined, talosctl health passed"),
        (
            ExitCode.REFUSED,
            (
                "etcd answers (a control plane lists its members) and no --force: restoring would lose every "
                f"write since the snapshot; or {SYNTH_RULE}; nothing was done"
            ),
        ),
        (
            ExitCode.BAD_INPUT,
            (
                "site file, unknown cluster, FILE missing, not a verified snapshot, another cluster's, or without "
                "etcd's digest and no --skip-hash-check; nothing was done"
            ),
        ),
        (ExitCode.DECLINED, "the typed SITE/CLUSTER was not given; nothing was done"),
        (
            ExitCode.FAILED,
            (
                "a reset, the wait for Preparing, the bootstrap or health failed or hung: the last line says which "
                "control planes are reset; run it again once fixed"
            ),
        ),
        (ExitCode.BACKUP_FAILED, "with --force: no fresh snapshot of the etcd that answers; nothing was done"),
        ExitCode.INTERRUPTED,
    ),
    examples=("terravixens restore-etcd prod --from etcd-snapshots/homelab/prod/FILE.snapshot",),
)


__all__ = [
    "RESTORE_ETCD",
    "RestoreOptions",
    "Source",
    "arguments",
    "check_source",
    "command",
    "observe",
    "restore_etcd",
]
