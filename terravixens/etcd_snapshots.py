"""etcd snapshots kept by terravixens: where they live, what they are named, how they are verified and pruned.

A snapshot is what `talosctl etcd snapshot PATH` writes: etcd's Maintenance.Snapshot stream, that is the bbolt
database followed by the 32-byte sha256 of that database (etcd appends it; `etcdutl snapshot restore`, and so
`talosctl bootstrap --recover-from`, refuses a file whose digest does not match). Snapshots hold every Secret of the
cluster, so they live in 0700 folders as 0600 files (docs/adr/0030-etcd-snapshots.md):

    <root>/etcd-snapshots/<site>/<cluster>/<cluster>_<UTC time>_<node>_<reason>.snapshot   the snapshot
    <root>/etcd-snapshots/<site>/<cluster>/<cluster>_<UTC time>_<node>_<reason>.json       its manifest

The UTC time is `YYYYMMDDTHHMMSS.ffffffZ`, so names sort by time; `node` is the control plane it came through.
The manifest is written last: it records the sha256 and what the verification found, and its presence is what
makes a snapshot "verified" here. A snapshot without one (a crash between the two, a file dropped in by hand) is
listed as unverified and never deleted by retention. A manifest is read by the strict, bounded reader
(terravixens.inputs: a regular file, at most 256 KiB, JSON without duplicate keys, 16 levels deep at most): one that
is not is a `StoreError`, as is a folder of the store that is a symbolic link or not the user's own — the store
cannot be used as it is, whichever control plane is asked (the commands say so, exit 2, before any talosctl call).

Retention (docs/adr/0053-snapshot-identity-and-plan-files.md) never trusts a manifest alone: before it deletes
anything, it verifies again (etcd's own checks, and the sha256 the manifest recorded) the newest snapshots it means
to keep, newest first, until it has `keep` good ones; only the snapshots older than those are deleted. A snapshot
that fails that check is never counted as one to keep and never deleted (it is listed for a person to look at), so
retention never deletes the last good snapshot for a corrupted newer one.

Verification (`verify_snapshot`), in order: the size (not empty, 512*k+32 bytes: etcd's digest is there), the
sha256 (the database hashes to the digest etcd appended), bbolt's meta pages (magic, version, checksum, and the
pages they count fit in the file), then, when the `etcd-snapshot` tool is built (`make tools`), etcd's own code:
bbolt's page-by-page consistency check and etcdutl's `snapshot status` (revision, keys, storage version, members).
Without the tool the verification stops at the meta pages: its `level` says "sha256" instead of "etcd", the
snapshot is still kept (the digest is exactly what a restore checks), and `require_tool=True` makes that a failure.

Pure standard library; nothing here runs talosctl: the commands hand `take` a callable that does. A failure is a
`SnapshotError` (the commands map it to ExitCode.BACKUP_FAILED, 5: nothing was done), or a `Verification` value
whose `ok` is False.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import stat
import struct
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO, TypedDict, Unpack

from terravixens import runner
from terravixens.inputs import InputError, load_json, read_text

SNAPSHOT_DIR = "etcd-snapshots"
SUFFIX = ".snapshot"
MANIFEST_SUFFIX = ".json"
MANIFEST_FORMAT = 1
DEFAULT_KEEP = 10
DIGEST_SIZE = 32  # sha256, appended by etcd's Maintenance.Snapshot
SECTOR = 512  # etcdutl's and talosctl's test for the digest: size % 512 == 32
TOOL_ENV = "TERRAVIXENS_ETCD_SNAPSHOT_TOOL"
TOOL_TIMEOUT = 5 * 60  # bbolt's check reads every page: minutes for a database of gigabytes
STAMP_FORMAT = "%Y%m%dT%H%M%S.%fZ"
TOKEN = re.compile(r"^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$")  # DNS labels, and IPv4 addresses for `node`
NAME = re.compile(
    r"^(?P<cluster>[a-z0-9.-]+)_(?P<stamp>\d{8}T\d{6}\.\d{6}Z)_(?P<node>[a-z0-9.-]+)_"
    r"(?P<reason>[a-z0-9.-]+)(?:_(?P<counter>\d+))?" + re.escape(SUFFIX) + "$"
)
MANIFEST_LIMIT = 256 * 1024  # a manifest is about 2 KiB: members, checks, digests
MANIFEST_DEPTH = 16  # manifest → verification → members → member → peer_urls: 5 levels
REPO_TOOL = Path(__file__).resolve().parent.parent / "tools" / "etcd-snapshot" / "bin" / "etcd-snapshot"

# bbolt's file format (go.etcd.io/bbolt internal/common): a 16-byte page header, then on pages 0 and 1 the meta:
# magic, version, page size, flags, root bucket (root page, sequence), freelist page, page count, txid, checksum.
BBOLT_MAGIC = 0xED0CDAED
BBOLT_VERSION = 2
PAGE_HEADER = 16
META = struct.Struct("<IIII QQ QQQ Q")
META_SUMMED = 56  # the checksum is FNV-1a 64 of the meta up to the checksum field


class SnapshotError(Exception):
    """A snapshot could not be taken, verified or kept: the step that needed it must not run. Commands map it to
    ExitCode.BACKUP_FAILED (5)."""

    def __init__(self, message: str, verification: Verification | None = None):
        super().__init__(message)
        self.verification = verification


class StoreError(SnapshotError):
    """The store itself cannot be used as it is (a folder that is a symbolic link, not a folder or not this user's; a
    manifest the strict reader refuses): no control plane can change that. Commands map it to ExitCode.BAD_INPUT (2),
    checked before anything is asked of a node."""


@dataclass(frozen=True)
class Verification:
    """What verify_snapshot found. `check` names the failed check (size, sha256, bbolt, etcd; read: the file could
    not be read; tool: the tool is missing, hung or answered nonsense; manifest: SnapshotStore.check found another
    file than the manifest's) and `reason` says why in one sentence; both empty when ok. `level` is how far it could
    look: "etcd" with the tool, "sha256" without it (then `passed` ends with "bbolt-meta")."""

    ok: bool
    path: Path
    level: str
    passed: tuple[str, ...]
    check: str = ""
    reason: str = ""
    size: int = 0
    sha256: str = ""  # of the whole file, as sha256sum prints it
    db_sha256: str = ""  # of the database alone: the digest etcd appended, when it matches
    revision: int | None = None  # from here down: etcd's snapshot status (level "etcd" only)
    total_keys: int | None = None
    etcd_hash: str = ""  # the hash talosctl prints after "snapshot info: hash"
    storage_version: str = ""  # empty before etcd 3.6
    cluster_version: str = ""
    members: tuple[dict[str, Any], ...] = ()
    tool: str = ""  # the tool and etcd module that judged it
    note: str = ""  # what was not checked, and why

    def summary(self) -> str:
        """One line for the operator."""
        if not self.ok:
            return f"{self.path.name}: not a usable etcd snapshot ({self.check}): {self.reason}"
        if self.level == "etcd":
            return (
                f"{self.path.name}: verified by etcd's own checks ({', '.join(self.passed)}): revision "
                f"{self.revision}, {self.total_keys} keys, {self.size} bytes, sha256 {self.sha256[:12]}"
            )
        return f"{self.path.name}: verified {', '.join(self.passed)} ({self.size} bytes); {self.note}"

    def record(self) -> dict[str, Any]:
        """The manifest's `verification`."""
        return {
            "level": self.level,
            "passed": list(self.passed),
            "db_sha256": self.db_sha256,
            "revision": self.revision,
            "total_keys": self.total_keys,
            "etcd_hash": self.etcd_hash,
            "storage_version": self.storage_version,
            "cluster_version": self.cluster_version,
            "members": list(self.members),
            "tool": self.tool,
            "note": self.note,
        }


@dataclass(frozen=True)
class Snapshot:
    """A snapshot in the store; `manifest` is None when it has none (not verified by terravixens)."""

    path: Path
    cluster: str
    taken_at: datetime
    node: str
    reason: str
    manifest: dict[str, Any] | None = None

    @property
    def verified(self) -> bool:
        return self.manifest is not None and self.manifest.get("sha256") is not None

    @property
    def sha256(self) -> str | None:
        return (self.manifest or {}).get("sha256")

    @property
    def manifest_path(self) -> Path:
        return manifest_path(self.path)


@dataclass(frozen=True)
class Pruned:
    """What retention did: `removed` deleted, `kept` verified and kept, `unverified` kept because nothing vouches
    for them, `failed` kept because their manifest vouches for them but they no longer verify (each with why). The
    last two are never deleted without a person looking: the commands print them."""

    removed: tuple[Path, ...]
    kept: tuple[Path, ...]
    unverified: tuple[Path, ...]
    failed: tuple[tuple[Path, str], ...] = ()


@dataclass(frozen=True)
class Taken:
    """A snapshot just kept: where, what its verification found, and what retention did afterwards."""

    snapshot: Snapshot
    verification: Verification
    pruned: Pruned

    def summary(self) -> str:
        """One line for the operator: the path relative to the store's root is the commands' to shorten."""
        return f"{self.snapshot.path.name}: {self.verification.summary().split(': ', 1)[1]}; {describe(self.pruned)}"


def no_snapshot_reason(text: str) -> str:
    """`--no-snapshot REASON`: a reason a reader of the log understands, not a bare flag."""
    reason = " ".join(text.split())
    if len(reason) < 8:
        raise ValueError(
            f"{text!r} is not a reason: say why this run goes without a fresh etcd snapshot, e.g. "
            f"--no-snapshot 'snapshot taken by hand at 10:02, etcd-snapshots/...'"
        )
    return reason


# ------------------------------------------------------------------------------------------------------ names
def stamp(when: datetime) -> str:
    if when.tzinfo is None:
        raise ValueError("a snapshot time must be timezone-aware (UTC)")
    return when.astimezone(UTC).strftime(STAMP_FORMAT)


def snapshot_name(cluster: str, taken_at: datetime, node: str, reason: str, counter: int = 1) -> str:
    """`<cluster>_<UTC time>_<node>_<reason>[_N].snapshot`; N only when the same name was already taken."""
    for what, value in (("cluster", cluster), ("node", node), ("reason", reason)):
        if not TOKEN.match(value):
            raise ValueError(
                f"snapshot {what} {value!r}: use lower-case letters, digits, '-' and '.' (a site name, "
                f"a node name or address)"
            )
    extra = f"_{counter}" if counter > 1 else ""
    return f"{cluster}_{stamp(taken_at)}_{node}_{reason}{extra}{SUFFIX}"


def parse_name(name: str) -> tuple[str, datetime, str, str] | None:
    """(cluster, taken_at, node, reason) of a snapshot file name; None for any other name."""
    found = NAME.match(name)
    if found is None:
        return None
    taken_at = datetime.strptime(found["stamp"], STAMP_FORMAT).replace(tzinfo=UTC)
    return found["cluster"], taken_at, found["node"], found["reason"]


def manifest_path(snapshot: Path) -> Path:
    return snapshot.with_name(snapshot.name[: -len(SUFFIX)] + MANIFEST_SUFFIX)


# ------------------------------------------------------------------------------------------------------- tool
def find_tool() -> Path | None:
    """The etcd-snapshot binary: $TERRAVIXENS_ETCD_SNAPSHOT_TOOL when set (it must then exist), else the one `make
    tools` builds in this checkout, else `etcd-snapshot` on PATH; None when there is none."""
    configured = os.environ.get(TOOL_ENV)
    if configured:
        return Path(configured)
    if REPO_TOOL.is_file() and os.access(REPO_TOOL, os.X_OK):
        return REPO_TOOL
    found = shutil.which("etcd-snapshot")
    return Path(found) if found else None


# ----------------------------------------------------------------------------------------------- verification
def _fnv1a64(data: bytes) -> int:
    value = 0xCBF29CE484222325
    for byte in data:
        value = ((value ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return value


def _meta(page: bytes) -> dict[str, int] | None:
    """bbolt's meta at the start of `page`, when it validates as bbolt's Meta.Validate does; else None."""
    if len(page) < PAGE_HEADER + META.size:
        return None
    raw = page[PAGE_HEADER : PAGE_HEADER + META.size]
    magic, version, page_size, _, root, _, freelist, pgid, txid, checksum = META.unpack(raw)
    if magic != BBOLT_MAGIC or version != BBOLT_VERSION or checksum != _fnv1a64(raw[:META_SUMMED]):
        return None
    return {"page_size": page_size, "root": root, "freelist": freelist, "pgid": pgid, "txid": txid}


def _bbolt_meta(handle: BinaryIO, db_size: int) -> str:
    """Why the database's meta pages do not hold (bbolt reads the newer valid one of the two); '' when they do."""
    handle.seek(0)
    first = _meta(handle.read(4096))
    candidates = [first] if first else []
    # Page 1 sits one page further: at the page size page 0 gives, else wherever bbolt would look for it.
    offsets = [first["page_size"]] if first else [1024 << shift for shift in range(15)]
    for offset in offsets:
        if offset >= db_size:
            break
        handle.seek(offset)
        second = _meta(handle.read(4096))
        if second:
            candidates.append(second)
            break
    if not candidates:
        return "no valid bbolt meta page (magic, version and checksum): not a bbolt database"
    meta = max(candidates, key=lambda found: found["txid"])
    counted = meta["pgid"] * meta["page_size"]
    if counted > db_size:
        return f"its meta page counts {counted} bytes of pages, the file holds {db_size} before the digest: truncated"
    return ""


class _Found(TypedDict, total=False):
    """What the checks found so far, for the Verification (size and digests; nothing when the file is unreadable)."""

    size: int
    sha256: str
    db_sha256: str


class _Status(TypedDict):
    """etcd's snapshot status, as the tool reports it."""

    revision: int | None
    total_keys: int | None
    etcd_hash: str
    storage_version: str
    cluster_version: str
    members: tuple[dict[str, Any], ...]
    tool: str


def _hash_file(path: Path) -> tuple[int, str, str, bytes] | str:
    """(size, sha256 of the file, sha256 of all but the last 32 bytes, those 32 bytes), or why it cannot be read."""
    try:
        with path.open("rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):
                return "not a regular file"
            size = info.st_size
            whole, database = hashlib.sha256(), hashlib.sha256()
            remaining = max(size - DIGEST_SIZE, 0)
            while remaining:
                chunk = handle.read(min(remaining, 1 << 20))
                if not chunk:
                    return "the file shrank while it was read"
                whole.update(chunk)
                database.update(chunk)
                remaining -= len(chunk)
            trailer = handle.read()
            whole.update(trailer)
            return size, whole.hexdigest(), database.hexdigest(), trailer
    except OSError as error:
        return error.strerror or str(error)


def verify_snapshot(
    path: Path, tool: Path | bool | None = True, require_tool: bool = False, timeout: float = TOOL_TIMEOUT
) -> Verification:
    """Verifies the file at `path` as an etcd snapshot; never raises for a bad file.

    `tool`: True finds the etcd-snapshot binary (find_tool), a Path uses that one, False or None checks without it.
    Without a tool the level is "sha256" (size, digest and meta pages); `require_tool` makes that a failure."""
    path = Path(path)
    binary = find_tool() if tool is True else (tool or None)
    level = "etcd" if binary else "sha256"

    def failed(check: str, reason: str, passed: list[str], **found: Unpack[_Found]) -> Verification:
        return Verification(False, path, level, tuple(passed), check, reason, **found)

    hashed = _hash_file(path)
    if isinstance(hashed, str):
        return failed("read", hashed, [])
    size, whole, database, trailer = hashed
    found: _Found = {"size": size, "sha256": whole}
    if size == 0:
        return failed("size", "the file is empty: no snapshot was written", [], **found)
    if size % SECTOR != DIGEST_SIZE:
        return failed(
            "size",
            f"{size} bytes is not 512*k+32: there is no sha256 digest where etcd appends one (the "
            f"file is truncated, has bytes appended, or was not streamed from etcd's "
            f"Maintenance.Snapshot by `talosctl etcd snapshot` or `etcdctl snapshot save`)",
            [],
            **found,
        )
    if database != trailer.hex():
        return failed(
            "sha256",
            f"the database hashes to {database} but etcd appended {trailer.hex()}: the file was "
            f"altered after etcd streamed it (a restore would refuse it)",
            ["size"],
            **found,
        )
    found["db_sha256"] = database
    with path.open("rb") as handle:
        broken = _bbolt_meta(handle, size - DIGEST_SIZE)
    if broken:
        return failed("bbolt", f"not a readable bbolt database: {broken}", ["size", "sha256"], **found)

    if binary is None:
        note = "etcd-snapshot tool not built (`make tools`): bbolt's page check and etcd's snapshot status not run"
        if require_tool:
            return failed("tool", note, ["size", "sha256", "bbolt-meta"], **found)
        return Verification(True, path, level, ("size", "sha256", "bbolt-meta"), note=note, **found)
    return _verify_with_tool(path, Path(binary), timeout, found)


def _verify_with_tool(path: Path, binary: Path, timeout: float, found: _Found) -> Verification:
    # The tool stops its own reading at `timeout` (it reads the database in a child of its own); the runner ends its
    # whole group `grace` later.
    ran = runner.run(
        [str(binary), "-timeout", f"{max(int(timeout), 1)}s", "verify", str(path)],
        timeout=timeout + min(30.0, timeout),
        label=binary.name,
    )
    passed = ("size", "sha256", "bbolt-meta")
    if ran.returncode is None:  # not started, past its deadline, or stopped by a signal
        return Verification(False, path, "etcd", passed, "tool", ran.reason, **found)
    try:
        report = json.loads(ran.stdout)
    except ValueError:
        report = None
    if not isinstance(report, dict) or not isinstance(report.get("ok"), bool):
        message = " ".join((ran.stderr or ran.stdout).split())[:300] or "no output"
        return Verification(
            False,
            path,
            "etcd",
            passed,
            "tool",
            f"{binary.name} exit {ran.returncode} without a report: {message}",
            **found,
        )
    if report.get("sha256") and report["sha256"] != found["sha256"]:
        return Verification(False, path, "etcd", passed, "read", "the file changed while it was verified", **found)
    details: _Status = {
        "revision": report.get("revision"),
        "total_keys": report.get("total_keys"),
        "etcd_hash": report.get("etcd_hash", ""),
        "storage_version": report.get("storage_version", ""),
        "cluster_version": report.get("cluster_version", ""),
        "members": tuple(report.get("members") or ()),
        "tool": report.get("tool", ""),
    }
    if not report["ok"]:
        return Verification(
            False,
            path,
            "etcd",
            tuple(report.get("passed") or ()),
            report.get("check", "etcd"),
            report.get("reason", "no reason given"),
            **found,
            **details,
        )
    return Verification(True, path, "etcd", tuple(report["passed"]), **found, **details)


# -------------------------------------------------------------------------------------------------- the store
def _shown(path: Path, root: Path) -> str:
    """A path as the store's messages show it: relative to the root the operator runs terravixens in."""
    with contextlib.suppress(ValueError):
        return str(path.relative_to(root))
    return str(path)


def _own_folder(current: Path, root: Path) -> os.stat_result:
    """`current`, which exists, as a folder of the store: a real folder of this user's (StoreError otherwise)."""
    info = current.lstat()
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise StoreError(
            f"{_shown(current, root)}: not a folder (a symbolic link or a file): snapshots are kept only in "
            f"real 0700 folders; move it away"
        )
    if info.st_uid != os.getuid():
        raise StoreError(
            f"{_shown(current, root)}: owned by uid {info.st_uid}, not by this user: snapshots hold every "
            f"Secret of the cluster; use a folder of your own"
        )
    return info


def _private_folder(path: Path, stop: Path) -> None:
    """Creates `path` and the folders between `stop` and it with mode 0700; refuses one that is a symbolic link,
    not a folder or not ours (StoreError), and takes group and other access away from one that had it."""
    stop.mkdir(parents=True, exist_ok=True)
    current = stop
    for part in path.relative_to(stop).parts:
        current = current / part
        with contextlib.suppress(FileExistsError):
            current.mkdir(mode=0o700)
        info = _own_folder(current, stop)
        if stat.S_IMODE(info.st_mode) != 0o700:
            os.chmod(current, 0o700)


def _existing_folder(path: Path, stop: Path) -> bool:
    """Whether `path` exists as a folder of the store, creating nothing: False when a part of it is missing,
    StoreError when a part is a symbolic link, not a folder or not ours."""
    current = stop
    for part in path.relative_to(stop).parts:
        current = current / part
        try:
            _own_folder(current, stop)
        except FileNotFoundError:
            return False
        except OSError as error:
            raise StoreError(f"{_shown(current, stop)}: cannot be read ({error.strerror or error})") from None
    return True


def _fsync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_new(folder: Path, name: str, data: bytes) -> Path:
    """Writes `folder/name` whole or not at all, never over an existing file: a 0600 temporary file (O_EXCL),
    synced, then linked to its name (a link fails where a rename would replace)."""
    fd, temporary = tempfile.mkstemp(dir=folder, prefix=".manifest-")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.link(temporary, folder / name)
    finally:
        os.unlink(temporary)
    return folder / name


@dataclass(frozen=True)
class SnapshotStore:
    """The snapshots of one site under `root` (the folder the operator runs terravixens in, as for state backups).

    `keep`: how many verified snapshots retention keeps per cluster (at least 1). `tool`: True finds the
    etcd-snapshot binary, a Path uses that one, False checks without it. `require_tool`: a snapshot that could not be
    judged by etcd's own code is refused."""

    root: Path
    site: str
    keep: int = DEFAULT_KEEP
    tool: Path | bool = True
    require_tool: bool = False
    timeout: float = TOOL_TIMEOUT
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC), repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.keep < 1:
            raise ValueError(f"keep={self.keep}: retention keeps at least the snapshot just taken (1 or more)")
        if not TOKEN.match(self.site):
            raise ValueError(f"site {self.site!r}: not a site name")

    @property
    def base(self) -> Path:
        return Path(self.root) / SNAPSHOT_DIR

    def folder(self, cluster: str) -> Path:
        """<root>/etcd-snapshots/<site>/<cluster> (not created)."""
        if not TOKEN.match(cluster):
            raise ValueError(f"cluster {cluster!r}: not a cluster name")
        return self.base / self.site / cluster

    def ensure_folder(self, cluster: str) -> Path:
        folder = self.folder(cluster)
        try:
            _private_folder(folder, Path(self.root))
        except OSError as error:
            raise StoreError(
                f"{_shown(folder, Path(self.root))}: cannot create the snapshot folder: {error.strerror or error}"
            ) from None
        return folder

    @contextlib.contextmanager
    def _locked(self, cluster: str) -> Iterator[Path]:
        """The cluster's folder, with its lock held: storing and pruning are one at a time per cluster."""
        folder = self.ensure_folder(cluster)
        fd = os.open(folder / ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield folder
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def scratch(self, cluster: str, prefix: str) -> Iterator[Path]:
        """A private (0700) temporary folder inside the cluster's folder, removed afterwards whatever happened; its
        name starts with a dot, so nothing in it is ever listed as a snapshot."""
        folder = self.ensure_folder(cluster)
        scratch = Path(tempfile.mkdtemp(prefix=prefix, dir=folder))
        try:
            yield scratch
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    @contextlib.contextmanager
    def incoming(self, cluster: str) -> Iterator[Path]:
        """A path for talosctl to write the snapshot to (`talosctl etcd snapshot PATH` writes PATH.part, then renames
        it): inside a private temporary folder of the cluster's folder, so that storing it is a link, not a copy.
        The temporary folder is removed afterwards, whatever happened."""
        with self.scratch(cluster, ".incoming-") as scratch:
            yield scratch / "etcd.snapshot"

    def add(
        self, cluster: str, source: Path, node: str, reason: str, taken_at: datetime | None = None, prune: bool = True
    ) -> Taken:
        """Verifies `source`, stores it under its name (never over another file) with its manifest, then applies
        retention (the new snapshot is never removed). A source inside the cluster's folder (`incoming`) is linked
        in, any other is copied (and left as it was). Raises SnapshotError when it is not a usable snapshot."""
        taken_at = taken_at or self.clock()
        snapshot_name(cluster, taken_at, node, reason)  # refuse bad names before reading anything
        source = Path(source)
        verification = verify_snapshot(source, self.tool, self.require_tool, self.timeout)
        if not verification.ok:
            raise SnapshotError(
                f"etcd snapshot of {cluster} through {node} not kept: {verification.summary()}", verification
            )
        with self._locked(cluster) as folder:
            path = self._place(folder, source, cluster, taken_at, node, reason, verification)
            manifest = {
                "format": MANIFEST_FORMAT,
                "file": path.name,
                "site": self.site,
                "cluster": cluster,
                "node": node,
                "reason": reason,
                "taken_at": taken_at.astimezone(UTC).isoformat(),
                "size": verification.size,
                "sha256": verification.sha256,
                "verification": verification.record(),
            }
            try:
                _write_new(folder, manifest_path(path).name, (json.dumps(manifest, indent=2) + "\n").encode())
                _fsync_folder(folder)
            except OSError as error:
                raise SnapshotError(
                    f"{path}: stored, but its manifest could not be written "
                    f"({error.strerror or error}): it stays, unverified"
                ) from None
            snapshot = Snapshot(path, cluster, taken_at, node, reason, manifest)
            pruned = self._prune(folder, cluster, self.keep, {path}, frozenset({path})) if prune else Pruned((), (), ())
        return Taken(snapshot, verification, pruned)

    def _place(
        self,
        folder: Path,
        source: Path,
        cluster: str,
        taken_at: datetime,
        node: str,
        reason: str,
        verification: Verification,
    ) -> Path:
        """Links the verified file (from `incoming`) or a copy of it (from anywhere else) to the first free name."""
        if folder.resolve() in source.resolve().parents:
            try:
                os.chmod(source, 0o600)
                with source.open("rb") as handle:
                    os.fsync(handle.fileno())
            except OSError as error:
                raise SnapshotError(f"{source}: cannot secure the snapshot: {error.strerror or error}") from None
            copied, origin = None, source
        else:
            copied = origin = self._copy_in(folder, source, verification)
        try:
            for counter in range(1, 1000):
                path = folder / snapshot_name(cluster, taken_at, node, reason, counter)
                try:
                    os.link(origin, path)
                    return path
                except FileExistsError:
                    continue
                except OSError as error:
                    raise SnapshotError(f"{path}: cannot store the snapshot: {error.strerror or error}") from None
            raise SnapshotError(f"{folder}: 999 snapshots named {cluster} {stamp(taken_at)} {node} {reason}")
        finally:
            if copied is not None:
                copied.unlink()

    @staticmethod
    def _copy_in(folder: Path, source: Path, verification: Verification) -> Path:
        fd, temporary = tempfile.mkstemp(dir=folder, prefix=".copy-")
        digest = hashlib.sha256()
        try:
            with os.fdopen(fd, "wb") as target, source.open("rb") as origin:
                while chunk := origin.read(1 << 20):
                    digest.update(chunk)
                    target.write(chunk)
                target.flush()
                os.fsync(target.fileno())
        except OSError as error:
            os.unlink(temporary)
            raise SnapshotError(f"{source}: cannot copy the snapshot in: {error.strerror or error}") from None
        if digest.hexdigest() != verification.sha256:
            os.unlink(temporary)
            raise SnapshotError(f"{source}: changed while it was copied in: not kept")
        return Path(temporary)

    def take(self, cluster: str, node: str, reason: str, fetch: Callable[[Path], object]) -> Taken:
        """Takes, verifies and keeps a snapshot: `fetch(path)` writes one to `path` (the commands run `talosctl
        --nodes NODE etcd snapshot PATH` through their runner) and answers with something that has `ok` and
        `reason` (talosctl.Call, runner.Ran). Raises SnapshotError when nothing usable was kept."""
        taken_at = self.clock()
        with self.incoming(cluster) as target:
            answer = fetch(target)
            if not getattr(answer, "ok", False):
                raise SnapshotError(
                    f"etcd snapshot of {cluster} through {node} failed: "
                    f"{getattr(answer, 'reason', '') or 'no reason given'}"
                )
            if not target.exists():
                raise SnapshotError(
                    f"etcd snapshot of {cluster} through {node}: talosctl answered but wrote no file at {target.name}"
                )
            return self.add(cluster, target, node, reason, taken_at)

    def snapshots(self, cluster: str) -> list[Snapshot]:
        """The cluster's snapshots, oldest first (by time, then name); files that are not snapshots are ignored.
        StoreError when a folder of the store is a link or not ours, or a manifest cannot be read strictly."""
        folder = self.folder(cluster)
        if not _existing_folder(folder, Path(self.root)):
            return []
        found = []
        for path in folder.iterdir():
            parsed = parse_name(path.name)
            if parsed is None or parsed[0] != cluster or not path.is_file() or path.is_symlink():
                continue
            found.append(Snapshot(path, *parsed, manifest=self.manifest_of(path)))
        return sorted(found, key=lambda snapshot: (snapshot.taken_at, snapshot.path.name))

    def manifest_of(self, snapshot: Path) -> dict[str, Any] | None:
        """The snapshot's manifest when it is one written for this very file; None when there is none or it names
        another file; StoreError when the manifest file cannot be read strictly (a link, too big, not JSON, nested
        deeper than a manifest is, duplicate keys)."""
        return read_manifest(snapshot, Path(self.root))

    def preflight(self, cluster: str) -> None:
        """What must hold before a snapshot is asked of any node: the cluster's folder (created 0700 if missing)
        and every manifest in it readable. Raises StoreError otherwise."""
        self.ensure_folder(cluster)
        self.snapshots(cluster)

    def latest(self, cluster: str) -> Snapshot | None:
        """The newest verified snapshot."""
        verified = [snapshot for snapshot in self.snapshots(cluster) if snapshot.verified]
        return verified[-1] if verified else None

    def check(self, snapshot: Snapshot) -> Verification:
        """Verifies a stored snapshot again, and that it is still the file its manifest describes."""
        verification = verify_snapshot(snapshot.path, self.tool, self.require_tool, self.timeout)
        if verification.ok and snapshot.sha256 and verification.sha256 != snapshot.sha256:
            return Verification(
                False,
                snapshot.path,
                verification.level,
                verification.passed,
                "manifest",
                f"sha256 {verification.sha256} is not the {snapshot.sha256} its manifest recorded: "
                f"the file was replaced",
                verification.size,
                verification.sha256,
            )
        return verification

    def prune(self, cluster: str, keep: int | None = None, protect: tuple[Path, ...] = ()) -> Pruned:
        """Keeps the newest `keep` (default the store's) verified snapshots that still verify, and removes the older
        ones with their manifests. Never removes one in `protect`, one without a manifest (listed in `unverified`),
        nor one that no longer verifies (listed in `failed`)."""
        keep = self.keep if keep is None else keep
        if keep < 1:
            raise ValueError(f"keep={keep}: retention keeps at least 1 snapshot")
        if not _existing_folder(self.folder(cluster), Path(self.root)):
            return Pruned((), (), ())
        with self._locked(cluster) as folder:
            return self._prune(folder, cluster, keep, set(protect))

    def _prune(
        self, folder: Path, cluster: str, keep: int, protect: set[Path], trusted: frozenset[Path] = frozenset()
    ) -> Pruned:
        """Keeps the newest `keep` verified snapshots that verify again now (etcd's own checks and their manifest's
        sha256; those in `trusted` were verified a moment ago), newest first; deletes the older ones with a
        manifest. Nothing is verified when nothing would be deleted; a snapshot that fails is left alone."""
        snapshots = self.snapshots(cluster)
        verified = [snapshot for snapshot in snapshots if snapshot.verified]
        unverified = tuple(snapshot.path for snapshot in snapshots if not snapshot.verified)
        if len(verified) <= keep:
            return Pruned((), tuple(snapshot.path for snapshot in verified), unverified)
        good: list[Path] = []
        failed: list[tuple[Path, str]] = []
        older: list[Snapshot] = []  # older than the `keep` good ones, not protected: deleted
        for snapshot in reversed(verified):
            if len(good) < keep:
                checked = None if snapshot.path in trusted else self.check(snapshot)
                if checked is None or checked.ok:
                    good.append(snapshot.path)
                else:
                    failed.append((snapshot.path, f"{checked.check}: {checked.reason}"))
            elif snapshot.path not in protect:
                older.append(snapshot)
        removed = []
        for snapshot in older:
            # The snapshot first, then its manifest: a crash in between leaves an orphan manifest, never an
            # unverified snapshot.
            with contextlib.suppress(FileNotFoundError):
                snapshot.path.unlink()
            with contextlib.suppress(FileNotFoundError):
                snapshot.manifest_path.unlink()
            removed.append(snapshot.path)
        if removed:
            _fsync_folder(folder)
        gone = set(removed)
        failing = {path for path, _ in failed}
        kept = tuple(s.path for s in verified if s.path not in gone and s.path not in failing)
        return Pruned(tuple(removed), kept, unverified, tuple(sorted(failed)))


def read_manifest(snapshot: Path, root: Path | None = None) -> dict[str, Any] | None:
    """The snapshot's manifest when it is one written for this very file (its `file` is the snapshot's name and it
    records a sha256); None when there is none, or it is another file's or not a manifest; StoreError when the file
    beside the snapshot cannot be read by the strict, bounded reader. `root` shortens the paths said."""
    path = manifest_path(snapshot)
    shown = _shown(path, root) if root is not None else str(path)
    try:
        info = path.lstat()
    except FileNotFoundError:
        return None
    except OSError as error:
        raise StoreError(f"{shown}: cannot be read ({error.strerror or error})") from None
    if stat.S_ISLNK(info.st_mode):
        raise StoreError(
            f"{shown}: a symbolic link where a snapshot's manifest should be: terravixens writes manifests as files; "
            f"move it away"
        )
    try:
        manifest = load_json(
            read_text(path, limit=MANIFEST_LIMIT, what="snapshot manifest"),
            path,
            what="snapshot manifest",
            max_depth=MANIFEST_DEPTH,
        )
    except InputError as error:
        problem = error.problems[0] if error.problems else "not readable"
        raise StoreError(
            f"{shown}: not a snapshot manifest ({problem}); terravixens writes small JSON manifests: move this file "
            f"away (its snapshot is then listed as unverified)"
        ) from None
    if not isinstance(manifest, dict) or manifest.get("file") != snapshot.name or not manifest.get("sha256"):
        return None
    return manifest


def _names(paths: tuple[Path, ...]) -> str:
    return ", ".join(path.name for path in paths[:3]) + (", ..." if len(paths) > 3 else "")


def describe(pruned: Pruned, removed_names: bool = False) -> str:
    """One line on what retention did, for the commands to print (`removed_names`: which ones were removed)."""
    removed = f": {', '.join(path.name for path in pruned.removed)}" if removed_names and pruned.removed else ""
    parts = [f"kept {len(pruned.kept)}", f"removed {len(pruned.removed)}{removed}"]
    if pruned.failed:
        failed = tuple(path for path, _ in pruned.failed)
        parts.append(
            f"{len(failed)} that no longer verif{'ies' if len(failed) == 1 else 'y'} left alone (look at "
            f"{'it' if len(failed) == 1 else 'them'}, then delete by hand; `snapshot CLUSTER --list` says why): "
            f"{_names(failed)}"
        )
    if pruned.unverified:
        parts.append(
            f"{len(pruned.unverified)} without a manifest left alone (check and delete by hand): "
            f"{_names(pruned.unverified)}"
        )
    return "; ".join(parts)


__all__ = [
    "DEFAULT_KEEP",
    "SNAPSHOT_DIR",
    "TOOL_ENV",
    "Pruned",
    "Snapshot",
    "SnapshotError",
    "SnapshotStore",
    "StoreError",
    "Taken",
    "Verification",
    "describe",
    "find_tool",
    "manifest_path",
    "no_snapshot_reason",
    "parse_name",
    "read_manifest",
    "snapshot_name",
    "verify_snapshot",
]
