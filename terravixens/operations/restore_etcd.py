"""`terravixens restore-etcd CLUSTER --from FILE`: Talos' documented etcd disaster recovery, guarded.

`--from s3://BUCKET/KEY`: an offsite backup of the cluster (ADR 0059), from the bucket its site's etcd_backup names,
read with the secrets file's etcd_backup.<cluster>: downloaded (bounded in bytes and time) into the private folder
below, decrypted there with age (the identity of --identity FILE or of the secrets file, checked first to be the
site's age_recipient's), then restored exactly like a local file, from step 1 on.

When etcd has lost quorum for good, Talos' procedure (disaster-recovery, 1.11-1.13) is: wipe etcd's data on every
control plane, wait until each one's etcd waits to be bootstrapped, bootstrap ONE of them from a snapshot; the
others join it. This command runs exactly that, and refuses what would make it worse:

1. FILE is read once, into a private copy (0600, in a 0700 folder of the cluster's snapshot store, removed
   afterwards): everything after reads the copy, so a file replaced or pruned at FILE meanwhile changes nothing.
   The copy is verified (terravixens.etcd_snapshots.verify_snapshot: size, etcd's digest, bbolt's meta pages,
   etcd's own checks with the etcd-snapshot tool). A file without etcd's digest (a `db` copied out of a data
   directory) is refused unless --skip-hash-check says so; it is then read by the same checks through a second
   private copy given a digest, and restored with `--recover-skip-hash-check`, said loudly. A snapshot whose name or
   manifest says it is another cluster's, or whose manifest records another file, is refused (BAD_INPUT); where it
   came from is printed only when its manifest vouches for it (written for this file, the same sha256, this site
   and cluster) — never from its name alone.
   Then whose etcd it is: the members the snapshot records (read by etcd's own membership reader in the
   etcd-snapshot tool) must include one of this cluster's control planes, by hostname (Talos names a member after
   its node's hostname) or by the address of its peer URL. A snapshot of another etcd (or one whose members cannot
   be read) is refused (REFUSED) before anything is asked of a node, unless --force-foreign-snapshot names its
   members exactly as the refusal prints them: a typed confirmation of what is restored
   (docs/adr/0053-snapshot-identity-and-plan-files.md).
2. etcd is looked at: `talosctl service etcd` on every control plane and `talosctl etcd members` (which needs a
   leader). When a control plane lists members, etcd works: restoring over it loses every write since the
   snapshot, so this refuses (REFUSED) unless --force — and then a fresh snapshot of the etcd that answers is taken
   first (BACKUP_FAILED when none can be; --no-snapshot REASON skips it).
3. the typed confirmation SITE/CLUSTER (or --confirm);
4. per control plane, by name, one at a time: `talosctl reset --graceful=false --reboot
   --system-labels-to-wipe=EPHEMERAL --wait --timeout T` (EPHEMERAL holds /var/lib/etcd; STATE, the machine
   configuration, stays);
5. `talosctl service etcd` polled (every --poll, until --timeout) until etcd is Preparing on every control plane;
6. the private copy verified again, then `talosctl bootstrap --recover-from=COPY` on the site's bootstrap node
   (cluster.bootstrap);
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
import ipaddress
import os
import stat
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from terravixens.arguments import (
    Definition,
    backup_secrets_option,
    duration,
    no_snapshot_option,
    site_option,
    talosctl_options,
)
from terravixens.config.addressing import node_address
from terravixens.config.model import Cluster
from terravixens.etcd_offsite import OffsiteError, decrypt, download, list_backups, parse_url, recipient_of
from terravixens.etcd_snapshots import (
    DIGEST_SIZE,
    SECTOR,
    SnapshotStore,
    StoreError,
    Verification,
    parse_name,
    read_manifest,
    verify_snapshot,
)
from terravixens.exitcodes import SYNTH_RULE, ExitCode, codes
from terravixens.operations.console import Console
from terravixens.operations.etcd import SnapshotPolicy, fresh_snapshot, platform_talosconfig
from terravixens.operations.files import private_directory
from terravixens.operations.journal import Journal
from terravixens.operations.offsite import identity as age_identity
from terravixens.operations.offsite import offsite
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
    Preparing (each talosctl call has the talosctl's own); `poll`: seconds between `service etcd` calls;
    `foreign`: --force-foreign-snapshot's MEMBERS, the snapshot's members as the refusal prints them (restore
    another etcd's snapshot into this cluster, knowingly)."""

    source: Path | str
    confirm: str | None = None
    force: bool = False
    foreign: str | None = None
    skip_hash_check: bool = False
    talosconfig: str | None = None
    identity: str | None = None  # --identity FILE: the age identity of an s3:// backup (else the secrets file's)
    secrets: str | None = None  # the secrets file: the bucket's keys (and the identity) of an s3:// backup
    snapshot: SnapshotPolicy = field(default_factory=SnapshotPolicy)
    timeout: float = 15 * 60
    poll: float = 5.0
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)
    clock: Callable[[], float] = field(default=time.monotonic, repr=False)


@dataclass(frozen=True)
class Source:
    """The verified snapshot: `path` is the private copy bootstrap gets (`skip_hash_check` only for a digest-less
    `db`), `given` the operator's --from, `sha256` the copy's as verified, and one line of where it came from."""

    path: Path
    shown: str
    skip_hash_check: bool
    verification: Verification
    origin: str  # what its manifest vouches for: "taken 2025-… through cp-a (manual)", or ""
    given: Path = Path()
    sha256: str = ""
    foreign: bool = False


# ------------------------------------------------------------------------------------------------ the file
def _shown(path: Path, root: Path) -> str:
    with contextlib.suppress(ValueError):
        return str(path.resolve().relative_to(root))
    return str(path)


def _found(verification: Verification) -> str:
    if verification.level == "etcd":
        return f"etcd's own checks: revision {verification.revision}, {verification.total_keys} keys"
    return f"{', '.join(verification.passed)} ({verification.note})"


def _refused(given: str, what: str) -> OperationError:
    return OperationError(f"{given}: {what}; nothing was done", ExitCode.BAD_INPUT)


def _copy_private(path: Path, folder: Path, given: str) -> tuple[Path, int, str]:
    """Reads --from once, into `folder`/snapshot (0600, never over a file): (the copy, its size, its sha256). A path
    that is not a regular file (a FIFO, a device, a folder) or cannot be read is BAD_INPUT; nothing waits on it."""
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; a regular file ignores it.
        source = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise _refused(given, f"cannot read it ({error.strerror})") from None
    copy = folder / "snapshot"
    digest = hashlib.sha256()
    size = 0
    try:
        if not stat.S_ISREG(os.fstat(source).st_mode):
            raise _refused(given, "not a file")
        target = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            while chunk := os.read(source, 1 << 20):
                digest.update(chunk)
                size += len(chunk)
                view = memoryview(chunk)
                while view:
                    view = view[os.write(target, view) :]
            os.fsync(target)
        finally:
            os.close(target)
    except OSError as error:
        raise _refused(given, f"cannot copy it to a private file ({error.strerror})") from None
    finally:
        os.close(source)
    return copy, size, digest.hexdigest()


def check_source(
    ws: Workspace,
    cluster_name: str,
    path: Path,
    skip_hash_check: bool,
    console: Console,
    folder: Path,
    foreign: str | None = None,
    shown: str | None = None,
) -> Source:
    """--from read once into a private copy in `folder`, that copy verified as step 1 says, and whose etcd it is;
    BAD_INPUT with the file, what is wrong and the way out when it is not usable, REFUSED when it is another
    cluster's (and --force-foreign-snapshot does not name its members). `shown`: what --from said, when `path` is
    the decrypted download of an s3:// backup."""
    layer = ws.platform_layer(cluster_name).name
    shown = shown or _shown(path, ws.root)
    given = f"--from {shown}"
    copy, size, sha256 = _copy_private(path, folder, given)
    if size % SECTOR == DIGEST_SIZE:
        verification = verify_snapshot(copy)
        if not verification.ok:
            raise _refused(given, f"not a usable etcd snapshot ({verification.check}): {verification.reason}")
        if verification.sha256 != sha256:
            raise _refused(given, "its private copy changed while it was verified")
        origin = _origin(ws, cluster_name, path, given, verification)
        member_line, is_foreign = _whose(ws, cluster_name, verification, given, foreign)
        console.step(
            layer,
            "verify",
            f"{shown}: {_found(verification)}, etcd's digest matches{origin and '; ' + origin}; read from a private "
            f"copy",
        )
        console.step(layer, "verify", member_line)
        if skip_hash_check:
            console.step(
                layer, "verify", "it carries etcd's digest: restored with the hash check (--skip-hash-check not needed)"
            )
        return Source(copy, shown, False, verification, origin, path, sha256, is_foreign)
    if not skip_hash_check:
        raise _refused(
            given,
            f"{size} bytes, no etcd digest at its end (a snapshot from `talosctl etcd snapshot` or `terravixens "
            f"snapshot` is 512*k+32 bytes). If it is a `db` file copied out of an etcd data directory (talosctl cp "
            f"/var/lib/etcd/member/snap/db), pass --skip-hash-check: nothing can then prove it is the database etcd "
            f"wrote",
        )
    _origin(ws, cluster_name, path, given, None)  # a name of another cluster is refused; no manifest vouches for it
    verification = _verify_copy(copy, size, given)
    member_line, is_foreign = _whose(ws, cluster_name, verification, given, foreign)
    console.step(
        layer,
        "verify",
        f"WARNING: {shown} has no etcd digest (--skip-hash-check): read by {_found(verification)}, but nothing proves "
        f"it is the database as etcd wrote it (a copy taken while etcd ran may lack its last writes); restored with "
        f"talosctl bootstrap --recover-skip-hash-check",
    )
    console.step(layer, "verify", member_line)
    return Source(copy, shown, True, verification, "", path, sha256, is_foreign)


def _verify_copy(path: Path, size: int, given: str) -> Verification:
    """A `db` without digest, judged by the same checks: a private copy with the digest etcd would have appended."""
    if size == 0 or size % SECTOR:
        raise _refused(given, f"{size} bytes is not whole pages: not a bbolt database (etcd's `db`)")
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
        raise _refused(given, f"not a usable etcd database ({verification.check}): {verification.reason}")
    return verification


def _origin(ws: Workspace, cluster_name: str, path: Path, given: str, verification: Verification | None) -> str:
    """Where the file came from, when its manifest vouches for it (a manifest written for this file name, recording
    this very sha256, this site and cluster): "taken … through NODE (REASON)"; "" otherwise — a name alone vouches
    for nothing. A name or manifest saying another cluster or site, or a manifest recording another sha256, is
    refused (BAD_INPUT)."""
    parsed = parse_name(path.name)
    if parsed is not None and parsed[0] != cluster_name:
        raise _refused(
            given,
            f"its name says it is a snapshot of cluster {parsed[0]!r}, not of {cluster_name!r}: restoring another "
            f"cluster's etcd would give this one its objects and identities",
        )
    try:
        manifest = read_manifest(path, ws.root)
    except StoreError as error:
        raise _refused(given, str(error)) from None
    if manifest is None:
        return ""
    site, cluster = manifest.get("site"), manifest.get("cluster")
    if site != ws.site.site:
        raise _refused(given, f"its manifest says it is a snapshot of site {site!r}, not of {ws.site.site!r}")
    if cluster != cluster_name:
        raise _refused(given, f"its manifest says it is a snapshot of cluster {cluster!r}, not of {cluster_name!r}")
    recorded = manifest.get("sha256")
    if verification is None or recorded != verification.sha256:
        found = verification.sha256 if verification else "a file without etcd's digest"
        raise _refused(
            given,
            f"sha256 {found} is not the {recorded} its manifest recorded: the file was replaced since it was kept",
        )
    node, reason, taken = manifest.get("node"), manifest.get("reason"), manifest.get("taken_at")
    try:
        when = f"{datetime.fromisoformat(str(taken)):%Y-%m-%d %H:%M:%S} UTC"
    except ValueError:
        when = "at a time its manifest does not say"
    return f"taken {when} through {node} ({reason}), as its manifest records"


# ------------------------------------------------------------------------------------------------ whose etcd
def _addresses(cluster: Cluster, name: str) -> set[str]:
    """Every address the site gives a control plane (its managed address is the one Talos advertises to etcd)."""
    networks = cluster.control_planes[name].networks
    found = {node_address(networks, cluster.management_vlan)}
    interfaces = [vlan.address for vlan in networks.vlans.values()]
    if networks.routable is not None:
        interfaces.append(networks.routable.address)
    found |= {str(ipaddress.ip_interface(interface).ip) for interface in interfaces}
    if networks.maintenance_ip is not None:
        found.add(networks.maintenance_ip)
    return {_normal(address) for address in found}


def _normal(address: str) -> str:
    with contextlib.suppress(ValueError):
        return str(ipaddress.ip_address(address))
    return address.lower()


def _member_host(url: object) -> str | None:
    with contextlib.suppress(ValueError):
        host = urlsplit(str(url)).hostname
        return _normal(host) if host else None
    return None


def _member_names(members: Sequence[dict[str, Any]]) -> str:
    """The members as the refusal prints them and --force-foreign-snapshot takes them: names (an unnamed one by its
    id), sorted, comma-separated; "unknown" when the snapshot's members could not be read."""
    if not members:
        return "unknown"
    return ",".join(sorted(str(member.get("name") or member.get("id") or "?") for member in members))


def _described(members: Sequence[dict[str, Any]]) -> str:
    """Each member as `NAME (PEER URLS)`, an unnamed one (added, never started) by its id."""
    shown = []
    for member in members:
        urls = ", ".join(map(str, member.get("peer_urls") or [])) or "no peer URL"
        shown.append(f"{member.get('name') or member.get('id')} ({urls})")
    return ", ".join(shown)


def ours(cluster: Cluster, members: Sequence[dict[str, Any]]) -> dict[str, str]:
    """Member description -> the control plane of `cluster` it is, by hostname (Talos names a member after its node's
    hostname) or by the host of one of its peer URLs (the address the node advertises to etcd)."""
    by_name = {}
    by_address = {}
    for name, node in cluster.control_planes.items():
        by_name[name] = name
        by_name[node.hostname or name] = name
        by_address.update(dict.fromkeys(_addresses(cluster, name), name))
    found = {}
    for member in members:
        label = str(member.get("name") or member.get("id"))
        if member.get("name") in by_name:
            found[label] = by_name[str(member["name"])]
            continue
        hosts = [_member_host(url) for url in member.get("peer_urls") or []]
        match = next((by_address[host] for host in hosts if host in by_address), None)
        if match is not None:
            found[label] = match
    return found


def _whose(
    ws: Workspace, cluster_name: str, verification: Verification, given: str, foreign: str | None
) -> tuple[str, bool]:
    """(one line saying whose etcd the snapshot is, whether it is another's). REFUSED, before anything is asked of a
    node, when none of its members is one of the cluster's control planes (or its members could not be read) and
    --force-foreign-snapshot does not name them."""
    cluster = ws.site.clusters[cluster_name]
    members = list(verification.members)
    matched = ours(cluster, members)
    if matched:
        listed = ", ".join(f"{member} is {node}" if member != node else member for member, node in matched.items())
        return f"its etcd members: {_described(members)}; this cluster's control planes among them: {listed}", False
    names = _member_names(members)
    planes = ", ".join(sorted(cluster.control_planes))
    if not members:
        why = (
            "whose etcd it is cannot be read: etcd's own checks did not run (the etcd-snapshot tool is not built: "
            "`make tools`)"
        )
    else:
        why = (
            f"it is not this cluster's etcd: its members {_described(members)} are none of {cluster_name}'s control "
            f"planes ({planes}) by hostname or peer address"
        )
    wanted = ",".join(part.strip() for part in (foreign or "").split(","))
    if foreign is None or wanted != names:
        mismatch = f" (--force-foreign-snapshot {foreign!r} is not {names!r})" if foreign is not None else ""
        raise OperationError(
            f"{given}: {why}{mismatch}. Restoring it would give {cluster_name} another cluster's objects, "
            f"identities and Secrets; to restore it anyway, knowingly, pass --force-foreign-snapshot {names}; "
            f"nothing was done",
            ExitCode.REFUSED,
        )
    return f"WARNING: {why}; restored anyway: --force-foreign-snapshot {names}", True


def reverify(source: Source) -> None:
    """The private copy, verified again right before bootstrap reads it: the same checks, the same sha256. FAILED
    when it changed (the control planes are reset and wait: running the command again starts from --from)."""
    if source.skip_hash_check:
        size = source.path.stat().st_size
        try:
            again = _verify_copy(source.path, size, f"the private copy of --from {source.shown}")
        except OperationError as error:
            again = Verification(False, source.path, "etcd", (), "etcd", str(error))
        sha256 = _sha256(source.path)
    else:
        again = verify_snapshot(source.path)
        sha256 = again.sha256
    if not again.ok or sha256 != source.sha256:
        why = again.reason if not again.ok else f"sha256 {sha256}, not the {source.sha256} verified"
        raise OperationError(
            f"the private copy of --from {source.shown} no longer verifies ({why}); etcd is not restored, the control "
            f"planes are reset and wait (Preparing): run the same command again",
            ExitCode.FAILED,
        )


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


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
    with contextlib.ExitStack() as stack:
        with journal.unit(VERIFY) as unit:
            folder = stack.enter_context(_private_folder(ws, cluster_name))
            given, shown = Path(options.source), None
            if str(options.source).startswith("s3://"):
                given, shown = (
                    _fetched(ws, cluster_name, str(options.source), options, console, folder),
                    str(options.source),
                )
            source = check_source(
                ws, cluster_name, given, options.skip_hash_check, console, folder, options.foreign, shown
            )
            unit.note = "no digest: --skip-hash-check" if source.skip_hash_check else "verified"
            if source.foreign:
                unit.note += ", another cluster's (--force-foreign-snapshot)"
        if options.talosconfig is None:
            with journal.unit(SYNTH):  # the platform layer's working directory, to read its talosconfig output
                console.step("site", "synth", ws.site.site)
                ws.synth()
        with platform_talosconfig(ws, tf, console, cluster_name, options.talosconfig) as talosconfig:
            talosctl = replace(talosctl, talosconfig=talosconfig)
            _restore(ws, cluster_name, talosctl, options, console, source, addresses, workers)
    return ExitCode.OK


def _fetched(
    ws: Workspace, cluster_name: str, url: str, options: RestoreOptions, console: Console, folder: Path
) -> Path:
    """An s3:// backup of the cluster, downloaded into `folder` and decrypted there (both 0600): the decrypted file.
    The bucket must be the one the site names, the key one of this cluster's backups under its prefix, the identity
    the one of the site's recipient; all checked before a byte is read. BAD_INPUT (nothing done) for what the
    operator gives, FAILED for a store or a decryption that fails."""
    layer = ws.platform_layer(cluster_name).name
    given = f"--from {url}"
    try:
        bucket_name, key = parse_url(url)
    except ValueError as error:
        raise _refused(given, str(error)) from None
    found = offsite(ws.site, cluster_name, options.secrets)
    backup = found.backup
    start = f"{found.bucket.prefix}/{cluster_name}-"
    if bucket_name != found.bucket.bucket or not key.startswith(start) or not key.endswith(".snap.age"):
        raise _refused(
            given,
            f"not a backup of {cluster_name}: its backups are s3://{found.bucket.bucket}/{start}*.snap.age "
            f"(clusters.{cluster_name}.etcd_backup); `terravixens snapshot {cluster_name} --list` lists them",
        )
    identity = age_identity(found, cluster_name, options.identity, options.secrets)
    try:
        recipient = recipient_of(identity)
    except OffsiteError as error:
        raise OperationError(f"{given}: {error}; nothing was done", ExitCode.FAILED) from None
    if recipient != backup.age_recipient:
        raise _refused(
            given,
            f"the age identity given decrypts what is encrypted to {recipient[:16]}…, and the site's backups are "
            f"encrypted to {backup.age_recipient[:16]}… (etcd_backup.age_recipient): give that recipient's identity",
        )
    try:
        listed = {item.key: item for item in list_backups(found.bucket, cluster_name)}
        if key not in listed:
            raise _refused(given, f"no such backup in s3://{found.bucket.bucket}/{start}* (it lists {len(listed)})")
        encrypted, decrypted = folder / "download.age", folder / "decrypted"
        size = download(found.bucket, key, encrypted)
        console.step(
            layer,
            "download",
            f"{url}: {size:,} bytes, uploaded {listed[key].modified:%Y-%m-%d %H:%M:%S} UTC, into a private folder",
        )
        decrypt(encrypted, identity, decrypted)
    except OffsiteError as error:
        raise OperationError(f"{given}: {error}; nothing was done", ExitCode.FAILED) from None
    encrypted.unlink(missing_ok=True)
    console.step(
        layer, "decrypt", f"decrypted with age (the identity of {recipient[:16]}…): {decrypted.stat().st_size:,} bytes"
    )
    return decrypted


@contextlib.contextmanager
def _private_folder(ws: Workspace, cluster_name: str) -> Iterator[Path]:
    """A 0700 folder in the cluster's snapshot store (beside the kept snapshots: the same disk, no size limit of a
    temporary file system) for the private copy of --from; removed afterwards, whatever happened. The store is
    checked first (its folders, every manifest in it): BAD_INPUT before anything is asked of a node."""
    store = SnapshotStore(ws.root, ws.site.site)
    with contextlib.ExitStack() as stack:
        try:
            store.preflight(cluster_name)  # the store as restore and --force's snapshot read it: before any node
            folder = stack.enter_context(store.scratch(cluster_name, ".restore-"))
        except StoreError as error:
            raise OperationError(f"{error}; nothing was done", ExitCode.BAD_INPUT) from None
        yield folder


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
    layer = ws.platform_layer(cluster_name).name
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
            f"cluster after that snapshot is lost"
            + (
                f"; that snapshot is ANOTHER etcd's (members {_member_names(source.verification.members)}): "
                f"{cluster_name} gets its objects, identities and Secrets"
                if source.foreign
                else ""
            ),
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
        reverify(source)
        console.step(
            layer,
            "bootstrap",
            f"{bootstrap} ({addresses[bootstrap]}) --recover-from the private copy of {source.shown} (verified again: "
            f"sha256 {source.sha256[:12]})",
        )
        answer = _changing(
            journal,
            BOOTSTRAP_UNKNOWN,
            partial(
                talosctl.bootstrap_recover,
                addresses[bootstrap],
                _given_to_talosctl(source.path),
                source.skip_hash_check,
            ),
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


def _given_to_talosctl(path: Path) -> str:
    """The private copy as talosctl is given it: relative to the working folder (talosctl runs there) when it lies
    under it, so that what talosctl prints names no folder of the machine; else absolute."""
    with contextlib.suppress(ValueError):
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    return str(path)


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
    if source.given.resolve() not in verified:
        return policy
    newer = len(verified) - verified.index(source.given.resolve())  # the source and those after it
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
        metavar="FILE|s3://BUCKET/KEY",
        help="the snapshot (etcd-snapshots/..., or any `talosctl etcd snapshot` file), or an offsite backup of the "
        "cluster (as `snapshot --list` shows it: downloaded, decrypted with age); verified first",
    )
    parser.add_argument(
        "--identity",
        metavar="FILE",
        help="with s3://: the age identity that decrypts the backup (0600; default: the secrets file's "
        "etcd_backup.<cluster>.age_identity)",
    )
    backup_secrets_option(parser)
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
    parser.add_argument(
        "--force-foreign-snapshot",
        metavar="MEMBERS",
        help="restore FILE although none of its etcd members is one of CLUSTER's control planes (another cluster's "
        "etcd): MEMBERS are its members' names exactly as the refusal prints them, a typed confirmation",
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
    if args.identity is not None and not args.source.startswith("s3://"):
        raise OperationError("--identity goes with --from s3://…: a local file is not encrypted", ExitCode.BAD_INPUT)
    options = RestoreOptions(
        source=args.source if args.source.startswith("s3://") else Path(args.source),
        identity=args.identity,
        secrets=args.backup_secrets,
        confirm=args.confirm,
        force=args.force,
        foreign=args.force_foreign_snapshot,
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
                "write since the snapshot; or none of the snapshot's etcd members is one of the cluster's "
                "control planes (another etcd's, or its members unreadable) and --force-foreign-snapshot does "
                f"not name them; or {SYNTH_RULE}; nothing was done"
            ),
        ),
        (
            ExitCode.BAD_INPUT,
            (
                "site file, unknown cluster, FILE missing, not a verified snapshot, named or recorded as another "
                "cluster's, or without etcd's digest and no --skip-hash-check; a snapshot folder that is a link "
                "or a manifest the strict reader refuses; an s3:// backup not of this cluster's bucket and prefix, "
                "no secrets file entry or age identity for it, an identity of another recipient; nothing was done"
            ),
        ),
        (ExitCode.DECLINED, "the typed SITE/CLUSTER was not given; nothing was done"),
        (
            ExitCode.FAILED,
            (
                "a reset, the wait for Preparing, the bootstrap or health failed or hung: the last line says which "
                "control planes are reset; run it again once fixed. Or an s3:// backup that could not be listed, "
                "downloaded or decrypted (nothing was done)"
            ),
        ),
        (ExitCode.BACKUP_FAILED, "with --force: no fresh snapshot of the etcd that answers; nothing was done"),
        ExitCode.INTERRUPTED,
    ),
    examples=(
        "terravixens restore-etcd prod --from etcd-snapshots/homelab/prod/FILE.snapshot",
        (
            "terravixens restore-etcd prod --from s3://etcd-backups/prod/prod-2026-01-10T04:00:01Z.snap.age "
            "--secrets secrets.yaml"
        ),
    ),
)


__all__ = [
    "RESTORE_ETCD",
    "RestoreOptions",
    "Source",
    "arguments",
    "check_source",
    "command",
    "observe",
    "ours",
    "restore_etcd",
    "reverify",
]
