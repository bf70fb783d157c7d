"""What the restore-etcd tests share (tests/test_restore_etcd.py, tests/test_etcd_backup.py): the fake talosctl in its
disaster-recovery state, a genuine snapshot file, restore-etcd run on the example site with a clock that moves only
when slept, and readings of what the fake was asked."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

from terravixens.operations.console import Console
from terravixens.operations.restore_etcd import RestoreOptions, restore_etcd
from terravixens.operations.workspace import Workspace
from terravixens.talosctl import Talosctl
from tests import etcd_tool
from tests.fake_terraform import FakeTerraform
from tests.tools_on_path import DISASTER, Tools


def tools(tmp_path: Path, **scenario) -> Tools:
    return Tools(
        tmp_path,
        **{
            "unreachable": [],
            "etcd_service": json.loads(json.dumps(DISASTER)),
            "etcd_tool": str(etcd_tool.binary()),
            **scenario,
        },
    )


def snapshot_file(tmp_path: Path, name: str = "db.snapshot", data: bytes | None = None) -> Path:
    path = tmp_path / name
    path.write_bytes(etcd_tool.genuine_snapshot().read_bytes() if data is None else data)
    return path


class Clock:
    """Time that moves only when slept: the wait's bound is tested without waiting."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def run(example_site, tmp_path, fake: Tools, source: Path, talosctl: Talosctl | None = None, **changes):
    console = changes.pop("console", None) or Console(out=io.StringIO())
    clock = Clock()
    options = RestoreOptions(
        **{
            "source": source,
            "confirm": "homelab/prod",
            "talosconfig": "talosconfig",
            "poll": 5,
            "timeout": 60,
            "sleep": clock.sleep,
            "clock": clock,
            **changes,
        }
    )
    ws = Workspace(example_site, root=tmp_path)
    code = restore_etcd(ws, "prod", FakeTerraform({}), talosctl or fake.talosctl(timeout=60), options, console)
    return code, console


def resets(fake: Tools) -> list[str]:
    return [line for line in fake.log() if " reset " in line]


def bootstrapped(fake: Tools) -> Path:
    """The file `bootstrap --recover-from` was given: the private copy (0600, in a 0700 folder of the store)."""
    [line] = [line for line in fake.log() if " bootstrap " in line]
    path = Path(line.split("--recover-from=", 1)[1].split()[0])
    assert path.name == "snapshot" and path.parent.name.startswith(".restore-"), path
    assert path.parent.parent.name == "prod" and path.parent.parent.parent.name == "homelab", path
    return path


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
