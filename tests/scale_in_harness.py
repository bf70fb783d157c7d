"""The scale-in harness (tests/test_scale_in.py, tests/test_real_etcd.py): a cluster of the example's shape whose
Terraform is tests/fake_terraform.py acting as the talos provider would, talosctl the fake (genuine etcd snapshots),
kubectl a script that records its calls; all write one call log. What a real cluster adds is said in the tests."""

from __future__ import annotations

import copy
import fcntl
import hashlib
import io
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from terravixens.exitcodes import ExitCode
from terravixens.operations import OperationError
from terravixens.operations.console import Console
from terravixens.operations.deploy import DeployOptions, deploy
from terravixens.operations.etcd import SnapshotPolicy
from terravixens.operations.journal import interrupted_line
from terravixens.operations.kube import Kubectl
from terravixens.operations.scale_in import ScaleInOptions
from terravixens.operations.terraform import Result
from terravixens.operations.workspace import Workspace
from tests import etcd_tool, support
from tests.fake_terraform import ADDRESSES, APPLY, VM, FakeTerraform, platform_state

ROOT = Path(__file__).resolve().parent.parent
FAKE = ROOT / "tests" / "fake_talosctl.py"
LAYER = "platform-prod"
MEMBERSHIP = "terraform_data.cluster_membership"
NEW_NODES = {  # nodes the example site does not have, shaped like its own
    "cp-d": ("pve3", 1104, "10.0.0.54"),
    "cp-e": ("pve2", 1105, "10.0.0.55"),
    "wk-c": ("pve1", 1203, "10.0.0.63"),
    "wk-d": ("pve2", 1204, "10.0.0.64"),
}
FAKE_KUBECTL = """#!/bin/sh
# fake kubectl: its arguments into the shared call log
exec {python} -c 'import fcntl, json, sys
path = sys.argv[1]
with open(path + ".lock", "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    state = json.load(open(path))
    state["calls"].append(["kubectl"] + sys.argv[2:])
    json.dump(state, open(path, "w"))' {scenario} "$@"
"""


def site_data(control_planes: list[str], workers: list[str]) -> dict:
    """The example site with these nodes (the example's own, and NEW_NODES shaped like them)."""
    data = support.example_data()
    prod = data["clusters"]["prod"]
    for role, names, template in (("control_planes", control_planes, "cp-c"), ("workers", workers, "wk-b")):
        known = prod[role]
        nodes = {}
        for name in names:
            if name in known:
                nodes[name] = known[name]
                continue
            hypervisor, vm_id, maintenance = NEW_NODES[name]
            node = copy.deepcopy(known[template])
            node.update(hypervisor=hypervisor, vm_id=vm_id)
            node["networks"]["maintenance_ip"] = maintenance
            node["networks"]["vlans"][111]["address"] = f"{ADDRESSES[name]}/24"
            if 120 in node["networks"]["vlans"]:
                node["networks"]["vlans"][120] = {"address": f"10.12.0.{ADDRESSES[name].rsplit('.', 1)[1]}/24"}
            nodes[name] = node
        prod[role] = nodes
    return data


def member(name: str) -> dict:
    return {"id": hashlib.sha256(name.encode()).hexdigest()[:16], "hostname": name, "address": ADDRESSES[name]}


class ClusterTerraform(FakeTerraform):
    """The fake Terraform whose applies act on the cluster as the talos provider does: a deleted control plane apply
    is a graceful reset (the node leaves etcd, unless `stays_in_etcd` names it: a reset that did not leave), a new
    control plane's apply makes it join. `fail` (command -> n): the n-th such call fails as Terraform does (exit 1).
    `ignore_targets`: plans the whole layer whatever -target says (a Terraform that does not honour it)."""

    def __init__(self, cluster: Cluster, states: dict[str, dict[str, dict]]):
        super().__init__(states)
        self.cluster = cluster
        self.fail: dict[str, int] = {}
        self.interrupt: dict[str, int] = {}
        self.seen: dict[str, int] = {}
        self.ignore_targets = False
        self.stays_in_etcd: set[str] = set()
        self.learners: set[str] = set()
        self.extra: list[dict] = []  # changes a targeted plan also carries (what the guard must refuse)
        self.shown: list[dict] = []

    def run(self, workdir: Path, *args: str) -> Result:
        result = super().run(workdir, *args)
        if args[0] == "show" and args[-1].endswith(".tfplan"):
            self.shown.append(json.loads(result.stdout))
        return result

    def run_json(self, workdir: Path, *args: str, on_message=None) -> Result:
        if args[0] in ("plan", "apply"):
            targets = [a.split("=", 1)[1] for a in args if a.startswith("-target=")]
            self.cluster.record("terraform", args[0], *targets)
            self.seen[args[0]] = self.seen.get(args[0], 0) + 1
            if self.interrupt.get(args[0]) == self.seen[args[0]]:
                raise KeyboardInterrupt  # what Python does to the main thread on Ctrl-C (the runner: SIGTERM too)
            if self.fail.get(args[0]) == self.seen[args[0]]:
                self.calls.append((Path(workdir).name, *args))
                return Result(1, "", f"Error: {args[0]} failed (scripted by the test)")
            if self.ignore_targets:
                args = tuple(a for a in args if not a.startswith("-target="))
        result = super().run_json(workdir, *args, on_message=on_message)
        if args[0] == "plan" and targets and self.extra:
            self.pending[Path(workdir).name] += self.extra
        return result

    def applied_change(self, layer: str, change: dict) -> None:
        address = change["address"]
        if not address.startswith(APPLY + "."):
            return
        name = address.split(".", 1)[1].removeprefix("node_").removesuffix("_apply")
        if change["action"] == "delete" and name not in self.stays_in_etcd:
            self.cluster.edit(
                lambda state: state.update(members=[m for m in state["members"] if m["hostname"] != name])
            )
        if change["action"] == "create" and name.startswith("cp-"):
            joined = {**member(name), "learner": name in self.learners}
            self.cluster.edit(lambda state: state["members"].append(joined))


class Cluster:
    """One test's cluster: the fake Terraform holding the platform layer's state, the fake talosctl's scenario
    (etcd members = the state's control planes) and a kubectl, all writing into one call log."""

    def __init__(self, folder: Path, control_planes: list[str], workers: list[str], **scenario):
        self.folder = folder
        self.scenario = folder / "scenario.json"
        self.scenario.write_text(
            json.dumps(
                {
                    "calls": [],
                    "members": [member(name) for name in control_planes],
                    "etcd_snapshot": etcd_tool.fake_talosctl_setup(),
                    **scenario,
                }
            )
        )
        bin_dir = folder / "bin"
        bin_dir.mkdir(exist_ok=True)
        self.talosctl_path = bin_dir / "talosctl"
        self.talosctl_path.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE} {self.scenario} "$@"\n')
        self.talosctl_path.chmod(0o755)
        self.kubectl_path = bin_dir / "kubectl"
        self.kubectl_path.write_text(FAKE_KUBECTL.format(python=sys.executable, scenario=self.scenario))
        self.kubectl_path.chmod(0o755)
        self.tf = ClusterTerraform(self, {LAYER: platform_state(control_planes, workers, "cp-a")})
        self.ws: Workspace | None = None

    def edit(self, change) -> None:
        with open(f"{self.scenario}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            state = json.loads(self.scenario.read_text())
            change(state)
            self.scenario.write_text(json.dumps(state))

    def record(self, *entry: str) -> None:
        self.edit(lambda state: state["calls"].append(list(entry)))

    def state(self) -> dict:
        return json.loads(self.scenario.read_text())

    def log(self) -> list[str]:
        """Every call in order: `terraform plan|apply TARGETS…`, `talosctl ADDRESS COMMAND…`, `kubectl …`."""
        lines = []
        for call in self.state()["calls"]:
            if call[0] in ("terraform", "kubectl"):
                lines.append(" ".join(call if call[0] == "terraform" else ["kubectl", *call[3:5]]))
            else:
                words = call[4:6] if call[4] in ("etcd", "get") else call[4:5]
                lines.append(" ".join(["talosctl", call[3], *words]))
        return lines

    def members(self) -> list[str]:
        return sorted(m["hostname"] for m in self.state()["members"])

    def deploy(
        self,
        site: dict,
        dry_run: bool = False,
        worker_batch: int | None = None,
        no_snapshot: str | None = None,
        yes: bool = True,
    ) -> Ran:
        first = self.ws is None
        if first:
            self.ws = Workspace(support.site_from(site), root=self.folder)
        console = Console(out=io.StringIO())
        options = DeployOptions(
            yes=yes,
            dry_run=dry_run,
            synth=first,  # the site does not change between the runs of a test: synthesized once
            scale_in=ScaleInOptions(
                worker_batch=worker_batch,
                snapshot=SnapshotPolicy(skip_reason=no_snapshot),
                talosctl=str(self.talosctl_path),
                timeout=60,
            ),
        )
        kubectl = Kubectl(str(self.kubectl_path), timeout=60)
        try:
            code, error = deploy(self.ws, [LAYER], self.tf, options, console, kubectl), ""
        except OperationError as stopped:
            code, error = stopped.code, str(stopped)
        except KeyboardInterrupt as stopped:
            line = interrupted_line(stopped, console.journal)
            return Ran(ExitCode.INTERRUPTED, console.out.getvalue(), "", line)
        return Ran(code, console.out.getvalue(), error, console.journal.line(interrupted=False) or "")


@dataclass
class Ran:
    code: int
    out: str
    error: str
    line: str

    def steps(self) -> list[str]:
        """The steps the run announced ('1/2 control plane cp-b leaves (etcd 3 → 2 members)')."""
        return re.findall(r"platform-prod: step — (\d+/\d+ .*)$", self.out, re.M)

    def listed(self) -> list[str]:
        """The steps listed before they run (the dry-run's, and the run's own list)."""
        return re.findall(r"^  (\d+/\d+ .*)$", self.out, re.M)


def removed(*names: str) -> list[str]:
    """What a step that takes these nodes out applies: each apply (reset), then each VM."""
    return [f"delete {APPLY}.node_{n}_apply" for n in names] + [f"delete {VM}.node_{n}_vm" for n in names]


def snapshots(folder: Path) -> list[Path]:
    where = folder / "etcd-snapshots" / "homelab" / "prod"
    return sorted(where.glob("*.snapshot")) if where.exists() else []


def health_lists(cluster: Cluster, flag: str = "--control-plane-nodes") -> list[str]:
    """The --control-plane-nodes (or --worker-nodes) of each `talosctl health` call, in order."""
    return [
        call[call.index(flag) + 1] if flag in call else ""
        for call in cluster.state()["calls"]
        if call[0] not in ("terraform", "kubectl") and call[4] == "health"
    ]


# ------------------------------------------------------------------------------------------------ 3 → 1, 5 → 3
