"""The etcd-snapshot tool (tools/etcd-snapshot, ADR 0030) for the tests: genuine snapshots from an embedded etcd on
loopback, and etcd's own verdict on a file.

`genuine_snapshot()` makes one snapshot per test process (an embedded etcd starts in about a second) and hands out
its path read-only: copy it before changing it. Its one member is named and addressed as the example site's control
plane cp-a of cluster prod (GENUINE_MEMBER: Talos names a member after its node's hostname and advertises
https://<address>:2380; the embedded etcd listens on loopback and dials nobody at that address).
`foreign_snapshot()` is the same, genuine, from another cluster (FOREIGN_MEMBER). `fake_talosctl_setup()` is the
scenario entry the fake talosctl streams the genuine one from (tests/fake_talosctl.py: `etcd snapshot PATH`).
"""

from __future__ import annotations

import atexit
import functools
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOOL_DIR = ROOT / "tools" / "etcd-snapshot"
BINARY = TOOL_DIR / "bin" / "etcd-snapshot"
MODULES = ("go.etcd.io/etcd/etcdutl/v3", "go.etcd.io/etcd/server/v3", "go.etcd.io/etcd/client/v3", "go.etcd.io/bbolt")
FIXTURE_KEYS = 20
# (name, advertised peer URL) of the snapshots' one member: the example site's cp-a, and a node of another cluster.
GENUINE_MEMBER = ("cp-a", "https://10.11.1.11:2380")
FOREIGN_MEMBER = ("db-1", "https://10.20.0.5:2380")


class ToolMissing(RuntimeError):
    pass


def binary() -> Path:
    if not BINARY.exists():
        raise ToolMissing(f"{BINARY} is missing: run `make tools` (builds it from the Go module proxy)")
    return BINARY


def pinned_modules() -> dict[str, str]:
    """What go.mod pins for the modules whose code judges a snapshot (what `-version` must print)."""
    text = (TOOL_DIR / "go.mod").read_text()
    return {module: re.search(rf"^\s*{re.escape(module)} (v\S+)", text, re.MULTILINE).group(1) for module in MODULES}


def run(*arguments: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([str(binary()), *arguments], capture_output=True, text=True, timeout=timeout)


def verify(path: Path) -> tuple[int, dict]:
    """(exit code, report) of `etcd-snapshot verify PATH`."""
    ran = run("verify", str(path))
    return ran.returncode, json.loads(ran.stdout)


def make_fixture(out: Path, keys: int = FIXTURE_KEYS, member: tuple[str, str] | None = None) -> dict:
    """`make-fixture`: a snapshot of a one-member etcd; `member` (name, peer URL) names it (default: "fixture",
    advertising its loopback peer URL)."""
    named = ["-name", member[0], "-peer-url", member[1]] if member else []
    ran = run("make-fixture", "-keys", str(keys), *named, str(out))
    if ran.returncode != 0:
        raise RuntimeError(f"etcd-snapshot make-fixture failed ({ran.returncode}): {ran.stderr.strip()[:500]}")
    return json.loads(ran.stdout)


@functools.cache
def _made(member: tuple[str, str]) -> tuple[Path, dict, dict]:
    folder = Path(tempfile.mkdtemp(prefix="etcd-fixture-"))
    atexit.register(shutil.rmtree, folder, True)
    path = folder / f"{member[0]}.snapshot"
    made = make_fixture(path, member=member)
    code, report = verify(path)
    if code != 0:
        raise RuntimeError(f"the genuine snapshot does not verify: {report}")
    path.chmod(0o400)
    return path, made, report


def _genuine() -> tuple[Path, dict, dict]:
    return _made(GENUINE_MEMBER)


def foreign_snapshot() -> Path:
    """A genuine snapshot of another etcd cluster (one member, FOREIGN_MEMBER); read-only."""
    return _made(FOREIGN_MEMBER)[0]


def genuine_snapshot() -> Path:
    """A snapshot streamed by a real (embedded) etcd through clientv3's Maintenance.Snapshot; read-only."""
    return _genuine()[0]


def genuine_fixture() -> dict:
    """What make-fixture said of it: bytes, keys, revision, member_id, cluster_id, etcd_version, modules."""
    return _genuine()[1]


def genuine_report() -> dict:
    """The tool's verify report of it."""
    return _genuine()[2]


def fake_talosctl_setup(damage: str | None = None) -> dict:
    """The fake talosctl's `etcd_snapshot` scenario entry: stream the genuine snapshot (optionally damaged)."""
    report = genuine_report()
    return {
        "fixture": str(genuine_snapshot()),
        "damage": damage,
        "info": {key: report[key] for key in ("etcd_hash", "revision", "total_keys", "total_size")},
    }
