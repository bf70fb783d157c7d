"""The faithful fake talosctl and a recording kubectl of one test, first on PATH (tests/fake_talosctl.py behind a
wrapper answering from a scenario file: cp-a at 10.11.1.11 does not answer, `etcd snapshot` streams a genuine snapshot,
tests/etcd_tool.py), and the fake Terraform and workspace whose calls go into the same log, so the order of
everything is visible. The dead-member, restore, snapshot, decommission, exit-code and hang tests share them."""

from __future__ import annotations

import fcntl
import json
import os
import sys
from pathlib import Path

from terravixens.operations.dead_member import DeadMemberOptions
from terravixens.operations.kube import Kubectl
from terravixens.operations.workspace import Workspace
from terravixens.talosctl import Talosctl
from tests import etcd_tool
from tests.fake_terraform import FakeTerraform, platform_state

FAKE = Path(__file__).resolve().parent / "fake_talosctl.py"
CONFIRM = "homelab/prod/cp-a"
ETCD = [
    {"id": "2a8f0e61c5b7d3f9", "hostname": "cp-a", "address": "10.11.1.11"},
    {"id": "7c1d4b9e0f3a6d21", "hostname": "cp-b", "address": "10.11.1.12"},
    {"id": "091e2f7a3b6c0d45", "hostname": "cp-c", "address": "10.11.1.13"},
]
FAKE_KUBECTL = """#!/bin/sh
echo "$@" >> "{log}"
"""


class Tools:
    """The fake talosctl (cp-a, 10.11.1.11, does not answer; `etcd snapshot` streams a genuine snapshot) and kubectl
    of one test, and their logs."""

    def __init__(self, folder: Path, **scenario):
        self.folder = folder
        self.scenario = folder / "scenario.json"
        state = {
            "versions": {"10.11.1.11": "v1.11.5", "10.11.1.12": "v1.11.5", "10.11.1.13": "v1.11.5"},
            "unreachable": ["10.11.1.11"],
            "members": ETCD,
            "calls": [],
            "etcd_snapshot": etcd_tool.fake_talosctl_setup(),
            **scenario,
        }
        self.scenario.write_text(json.dumps(state))
        bin_dir = folder / "bin"
        bin_dir.mkdir(exist_ok=True)
        self.talosctl_path = bin_dir / "talosctl"
        self.talosctl_path.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE} {self.scenario} "$@"\n')
        self.talosctl_path.chmod(0o755)
        self.kubectl_log = folder / "kubectl.log"
        self.kubectl_path = bin_dir / "kubectl"
        self.kubectl_path.write_text(FAKE_KUBECTL.format(log=self.kubectl_log))
        self.kubectl_path.chmod(0o755)

    def talosctl(self, timeout: int = 30, probe_timeout: float = 10) -> Talosctl:
        return Talosctl(str(self.talosctl_path), "talosconfig", timeout, probe_timeout=probe_timeout, grace=2)

    def kubectl(self) -> Kubectl:
        return Kubectl(str(self.kubectl_path), timeout=30)

    def state(self) -> dict:
        return json.loads(self.scenario.read_text())

    def log(self) -> list[str]:
        """Every call in order: talosctl as `talosctl ADDRESS COMMAND…`, Terraform as `terraform …`, a synth (of
        LoggedWorkspace) as `synth`."""
        return [
            " ".join(call) if call[0] in ("terraform", "synth") else " ".join(["talosctl", call[3], *call[4:]])
            for call in self.state()["calls"]
        ]

    def record(self, *entry: str) -> None:
        with open(f"{self.scenario}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            state = self.state()
            state["calls"].append(list(entry))
            written = self.scenario.with_name(f"{self.scenario.name}.{os.getpid()}")
            written.write_text(json.dumps(state))
            written.replace(self.scenario)  # whole or not at all, for a reader without the lock


class LoggedTerraform(FakeTerraform):
    """The fake Terraform, its calls also written into the talosctl fake's log."""

    def __init__(self, tools: Tools, fail: tuple[str, ...] = ()):
        super().__init__({"platform-prod": platform_state(["cp-a", "cp-b", "cp-c"], ["wk-a", "wk-b"], "cp-a")})
        self.tools = tools
        self.fail = fail

    def run(self, workdir, *args):
        self.tools.record("terraform", *args)
        if " ".join(args[:2]) in self.fail:
            from terravixens.operations.terraform import Result

            return Result(1, "", "Error: Failed to load state: permission denied")
        return super().run(workdir, *args)


class LoggedWorkspace(Workspace):
    """The workspace, its synth also written into the talosctl fake's log (where it stands among the calls)."""

    def __init__(self, site, tools: Tools, **kwargs):
        super().__init__(site, **kwargs)
        self.tools = tools

    def synth(self):
        self.tools.record("synth")
        return super().synth()


def options(**changes) -> DeadMemberOptions:
    return DeadMemberOptions(**{"confirm": CONFIRM, "probes": 2, "probe_window": 0.5, **changes})


# The talosctl fake's `etcd_service` when etcd lost quorum (restore-etcd's disaster): two members up without a
# leader, one crash-looping (Talos restarts a failed service for ever).
DISASTER = {
    "10.11.1.11": {
        "state": "Running",
        "health": "Fail",
        "message": "context deadline exceeded",
        "events": [["Running", "Health check failed: context deadline exceeded"]],
    },
    "10.11.1.12": {
        "state": "Waiting",
        "health": "?",
        "events": [
            ["Waiting", 'Error running Containerd(etcd), going to restart forever: task "etcd" failed: exit code 1']
        ],
    },
    "10.11.1.13": {
        "state": "Running",
        "health": "Fail",
        "message": "context deadline exceeded",
        "events": [["Running", "Health check failed: context deadline exceeded"]],
    },
}
