"""The fake talosctl of the upgrade tests and the loopback site they upgrade (tests/fake_talosctl.py behind a wrapper
that answers from a scenario file and records its calls; its etcd snapshots are genuine, tests/etcd_tool.py), and
the image roll-out's schematics. tests/test_upgrade.py, and the exit-code, JSON and hang tests that run `upgrade`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from terravixens.config.model import TalosImage
from terravixens.talos.image import schematic_id
from terravixens.talosctl import Talosctl
from tests import etcd_tool, support

FAKE = Path(__file__).resolve().parent / "fake_talosctl.py"
ADDRESSES = {
    "cp-a": "127.11.1.11",
    "cp-b": "127.11.1.12",
    "cp-c": "127.11.1.13",
    "wk-a": "127.11.1.21",
    "wk-b": "127.11.1.22",
    "wk-c": "127.11.1.23",
}
NAMES = {address: name for name, address in ADDRESSES.items()}
SCHEMATIC = "ce4c980550dd2ab1b17bbf2b08801c7eb59418eafe8f279833297925d67c7515"
FIVE = ["cp-a", "cp-b", "cp-c", "wk-a", "wk-b"]


def site_data(workers: int = 2, talos_version: str = "v1.11.6") -> dict:
    data = support.loopback_data()
    data["clusters"]["prod"]["talos_version"] = talos_version
    if workers == 3:
        data["clusters"]["prod"]["workers"]["wk-c"] = {
            "hypervisor": "pve2",
            "vm_id": 1203,
            "networks": {
                "maintenance_ip": "127.0.0.63",
                "vlans": {111: {"address": "127.11.1.23/24", "gateway": "127.11.1.1"}},
            },
        }
    return data


class Fake:
    """The fake talosctl of one test: its path, its scenario, and what it was asked."""

    def __init__(self, folder: Path, versions: dict[str, str], **scenario):
        self.scenario = folder / "scenario.json"
        addresses = {
            key: [ADDRESSES.get(n, n) for n in value]
            for key, value in scenario.items()
            if key in ("broken", "breaks_on_upgrade", "together", "rolls_back", "unreachable")
        }
        # the image each node booted: the target's schematic unless the test says otherwise (None: no such row)
        tables = {
            key: {command: [ADDRESSES.get(n, n) for n in nodes] for command, nodes in value.items()}
            for key, value in scenario.items()
            if key in ("fail", "hang")
        }
        booted = {**dict.fromkeys(versions, SCHEMATIC), **scenario.get("schematics", {})}
        state = {
            "etcd_snapshot": etcd_tool.fake_talosctl_setup(scenario.get("snapshot_damage")),
            "images": scenario.get("images", {}),
            "versions": {ADDRESSES[n]: v for n, v in versions.items()},
            "calls": [],
            **addresses,
            **tables,
            "schematics": {ADDRESSES[n]: v for n, v in booted.items() if v is not None},
            "health_script": scenario.get("health_script", []),
            "together_wait": scenario.get("together_wait", 10),
        }
        self.scenario.write_text(json.dumps(state))
        self.path = folder / "talosctl"
        self.path.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE} {self.scenario} "$@"\n')
        self.path.chmod(0o755)

    def state(self) -> dict:
        return json.loads(self.scenario.read_text())

    def calls(self) -> list[list[str]]:
        return self.state()["calls"]

    def kinds(self) -> list[str]:
        return [call[4] for call in self.calls()]

    def upgraded(self) -> list[str]:
        return [NAMES[call[call.index("--nodes") + 1]] for call in self.calls() if call[4] == "upgrade"]

    def snapshots(self) -> list[str]:
        """The node each `etcd snapshot` went through, in order."""
        return [NAMES[call[3]] for call in self.calls() if call[4:6] == ["etcd", "snapshot"]]

    def change(self, **entries) -> None:
        """Edits the scenario between two runs (e.g. a hang that is over)."""
        state = self.state()
        state.update(entries)
        self.scenario.write_text(json.dumps(state))

    def talosctl(self, timeout: int = 60) -> Talosctl:
        return Talosctl(str(self.path), "talosconfig", timeout)


# An image roll-out: the site's Talos image changes (an extension added: a new Image Factory schematic).
ISCSI = ["siderolabs/iscsi-tools", "siderolabs/qemu-guest-agent"]
NEW = schematic_id(TalosImage(extensions=ISCSI))
IMAGES = {SCHEMATIC: [["qemu-guest-agent", "10.0.2"]], NEW: [["iscsi-tools", "v0.2.0"], ["qemu-guest-agent", "10.0.2"]]}


def with_extensions(data: dict, extensions: list[str], hypervisors: tuple[str, ...] | None = None) -> dict:
    """The image of `hypervisors` (default: every hypervisor of the site) with these extensions."""
    for name in data["hypervisors"] if hypervisors is None else hypervisors:
        data["hypervisors"][name].setdefault("talos_image", {})["extensions"] = extensions
    return data
