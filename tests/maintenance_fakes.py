"""The machines of a site made of fakes, for `terravixens maintain`: the fake Proxmox VE (tests/fakepve_ext.py) runs a
VM for every Talos node and a guest for every standalone node of the hypervisors, and `Machines` keeps the Talos and
Kubernetes fakes (tests/cluster_fakes.py) in step with it, as real machines would be:

- a Talos node told to `talosctl shutdown` powers its VM off: Proxmox sees it stopped;
- a VM that is not running does not answer talosctl (the fake's `unreachable`), and its Node turns Ready Unknown
  ("Kubelet stopped posting node status", what the node lifecycle controller writes);
- a VM started through the API boots: after `boot` seconds Talos answers and its Node turns Ready True;
- after every change of which control planes run, etcd's members are read through the fake talosctl, through a
  control plane that runs (`quorum`): each reading says which members were up and whether etcd had a leader.

What a real cluster adds: the minutes a boot and a drain take, the 40 s before a Node is marked NotReady, etcd
re-electing a leader, Talos' own cordon and drain during its shutdown, pods rescheduled on the other nodes.
Nothing here listens anywhere but on loopback (the fake Proxmox VE); every thread is stopped by `stop()`.
"""

from __future__ import annotations

import copy
import io
import json
import re
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from terravixens.config.loader import load_site
from terravixens.config.model import Site
from terravixens.operations.console import Console
from terravixens.operations.kube import Kubectl
from terravixens.operations.maintain import MaintainOptions, Tools, maintain, postures_of
from terravixens.operations.outcome import OperationError
from terravixens.operations.terraform import Terraform
from terravixens.operations.workspace import Workspace
from terravixens.proxmox_api import ProxmoxApi
from terravixens.roles import Role
from terravixens.standalone.topology import placement
from terravixens.talosctl import Talosctl
from tests import etcd_tool, support
from tests.cluster_fakes import Cluster
from tests.fakepve_ext import FakePveServer
from tests.loopback import free_port

ROOT = Path(__file__).resolve().parent.parent
NOT_POSTING = {"reason": "NodeStatusUnknown", "message": "Kubelet stopped posting node status.", "status": "Unknown"}
POSTING = {"reason": "KubeletReady", "message": "kubelet is posting ready status", "status": "True"}


def three_host_data(endpoint: str, guests: bool = True) -> dict:
    """The example site on loopback with three hypervisors and its control planes spread (cp-c on pve3), and (with
    `guests`) the standalone example's guests on pve1: `tools` (a VM, posture dev) and `nest1` (a nested Proxmox VE
    host, posture prod, with dns1 and jump1 inside it)."""
    data = support.loopback_data(endpoint)
    data["hypervisors"].setdefault("pve3", {**copy.deepcopy(data["hypervisors"]["pve2"]), "node_name": "pve3"})
    data["clusters"]["prod"]["control_planes"]["cp-c"]["hypervisor"] = "pve3"
    if guests:
        text = re.sub(r"\b10\.(\d+)\.(\d+)\.(\d+)", r"127.\1.\2.\3", (ROOT / "sites" / "standalone.yaml").read_text())
        data["standalone"] = yaml.safe_load(text)["standalone"]
    return data


def write_site(folder: Path, data: dict) -> Path:
    """The site file, with the standalone example's specs next to it (their postures say how guests stop)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "site.yaml"
    path.write_text(yaml.safe_dump(data))
    specs = folder / "specs"
    specs.mkdir(exist_ok=True)
    for spec in (ROOT / "sites" / "specs").glob("*.yaml"):
        (specs / spec.name).write_text(spec.read_text())
    return path


@dataclass(frozen=True)
class Reading:
    """One read of etcd's members after a change: which control planes ran, through which one it was read, and
    whether etcd answered (it needs a leader: a quorum of members)."""

    running: tuple[str, ...]
    through: str | None
    leader: bool
    members: tuple[str, ...]


class Machines:
    """The fake Proxmox VE's VMs and the Talos/Kubernetes fakes, kept in step by a thread (see the module)."""

    def __init__(self, fake: FakePveServer, site: Site, cluster: Cluster, boot: float = 0.3):
        self.fake, self.site, self.cluster, self.boot = fake, site, cluster, boot
        self.nodes = {node.address: node for node in cluster.nodes}
        self.vm_of = {}  # address -> vmid
        spec = site.clusters[cluster.cluster]  # one cluster: the one `cluster` fakes
        for name, node in {**spec.control_planes, **spec.workers}.items():
            self.vm_of[next(n.address for n in cluster.nodes if n.name == name)] = node.vm_id
        self.readings: list[Reading] = []
        self.booted_at: dict[int, float] = {}
        self._seen_shutdowns = 0
        self._running_cps: tuple[str, ...] | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    # ------------------------------------------------------------------------------------------------ set up
    def create(self) -> Machines:
        """A running VM for every Talos node and every guest of a hypervisor (nested guests live on their host's own
        API, not here)."""
        site = self.site

        def make(pve) -> None:
            for spec in site.clusters.values():
                for name, node in sorted({**spec.control_planes, **spec.workers}.items()):
                    node_name = site.hypervisors[node.hypervisor].node_name
                    vm = pve.add_vm(node.vm_id, node.hostname or name, node=node_name, status="running")
                    vm.agent = {}
            for guest in placement(site).values():
                if guest.parent not in site.hypervisors:
                    continue
                node_name = site.hypervisors[guest.parent].node_name
                if guest.type == "ct":
                    pve.add_ct(guest.vm_id, guest.name, node=node_name, status="running")
                else:
                    pve.add_vm(guest.vm_id, guest.name, node=node_name, status="running").agent = {}

        self.fake.call(make, self.fake.pve)
        self.booted_at = dict.fromkeys(self.vm_of.values(), float("-inf"))  # up since long before the test
        return self

    def start(self) -> Machines:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    # ------------------------------------------------------------------------------------------------ state
    def statuses(self) -> dict[int, str]:
        def read(pve) -> dict[int, str]:
            found = {vm.vmid: vm.status for vm in pve.vms}
            found.update({ct.vmid: ct.status for ct in pve.cts})
            return found

        return self.fake.call(read, self.fake.pve)

    def guest(self, vmid: int):
        return self.fake.call(lambda pve: pve.guest(vmid), self.fake.pve)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sync()
            time.sleep(0.05)

    def sync(self) -> None:
        shutdowns = json.loads(self.cluster.talos_scenario.read_text()).get("shutdown", [])
        for address in shutdowns[self._seen_shutdowns :]:  # Talos powers the machine off
            vmid = self.vm_of[address]

            def power_off(pve, vmid=vmid) -> None:
                vm = pve.vm(vmid)
                vm.status = vm.qmpstatus = "stopped"

            self.fake.call(power_off, self.fake.pve)
        self._seen_shutdowns = len(shutdowns)
        statuses = self.statuses()
        now = time.monotonic()
        up = set()
        for address, vmid in self.vm_of.items():
            if statuses.get(vmid) == "running":
                self.booted_at.setdefault(vmid, now)
                if now - self.booted_at[vmid] >= self.boot:
                    up.add(address)
            else:
                self.booted_at.pop(vmid, None)
        down = sorted(set(self.vm_of) - up)
        names = {node.address: node.hostname for node in self.cluster.nodes}

        def talos(state: dict) -> None:
            state["unreachable"] = down

        def kube(state: dict) -> None:
            for node in state["objects"]["nodes"]:
                address = next(a for a, n in names.items() if n == node["metadata"]["name"])
                ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
                ready.update(POSTING if address in up else NOT_POSTING)

        self.cluster.talos(talos)
        self.cluster.kube(kube)
        running = tuple(sorted(n.name for n in self.cluster.nodes if n.role is Role.CONTROLPLANE and n.address in up))
        if running != self._running_cps:
            self._running_cps = running
            self.readings.append(self.read_members(running))

    def read_members(self, running: tuple[str, ...]) -> Reading:
        """`talosctl etcd members` through the first control plane that runs (by name), with the fake talosctl."""
        through = next((n for n in self.cluster.nodes if n.name in running), None)
        if through is None:
            return Reading(running, None, False, ())
        ran = subprocess.run(
            [
                str(self.cluster.talosctl_path),
                "--talosconfig",
                str(self.cluster.talosconfig),
                "--nodes",
                through.address,
                "etcd",
                "members",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        listed = tuple(sorted(line.split()[2] for line in ran.stdout.splitlines()[1:] if line.strip()))
        return Reading(running, through.name, ran.returncode == 0 and bool(listed), listed)


# ------------------------------------------------------------------------------------------------------ the world
HOST = "127.0.0.51"


class World:
    """One site, its fake Proxmox VE, its cluster fakes and the machines between them."""

    def __init__(self, tmp_path: Path, data_change=None, boot: float = 0.3):
        self.tmp = tmp_path
        self.server = FakePveServer(HOST, free_port(HOST), tmp_path / "pki", nodes=("pve1", "pve2", "pve3")).start()
        self.machines: Machines | None = None
        try:
            data = three_host_data(self.server.url)
            if data_change is not None:
                data_change(data)
            self.site_path = write_site(tmp_path / "site", data)
            self.site = load_site(self.site_path)
            (tmp_path / "fakes").mkdir()
            self.cluster = Cluster(tmp_path / "fakes", self.site)
            self.cluster.talos(lambda state: state.update(etcd_snapshot=etcd_tool.fake_talosctl_setup()))
            self.pods("wk-a", "web-1", "web-2")
            self.machines = Machines(self.server, self.site, self.cluster, boot=boot).create().start()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        if self.machines is not None:
            self.machines.stop()
        self.server.stop()

    def pods(self, node: str, *names: str) -> None:
        """A Cilium agent (a DaemonSet's) and `names` (a Deployment's) on the Node."""

        def change(state: dict) -> None:
            pods = state["objects"].setdefault("pods", [])
            owner = [{"kind": "DaemonSet", "name": "cilium"}]
            pods.append(
                {
                    "metadata": {"name": f"cilium-{node}", "namespace": "kube-system", "ownerReferences": owner},
                    "spec": {"nodeName": node},
                }
            )
            for name in names:
                owned = [{"kind": "ReplicaSet", "name": "web-5d8f"}]
                pods.append(
                    {
                        "metadata": {"name": name, "namespace": "shop", "ownerReferences": owned},
                        "spec": {"nodeName": node},
                    }
                )

        self.cluster.kube(change)

    def options(self, hypervisor: str = "pve1", **changes) -> MaintainOptions:
        settings = {
            "confirm": f"homelab/{hypervisor}",
            "talosctl": str(self.cluster.talosctl_path),
            "kubectl": str(self.cluster.kubectl_path),
            "talosconfig": str(self.cluster.talosconfig),
            "kubeconfig": str(self.cluster.kubeconfig),
            "timeout": 20,
            "drain_timeout": 10,
            "check_wait": 0,
            "postures": postures_of(str(self.site_path), self.site),
            **changes,
        }
        return MaintainOptions(hypervisor, **settings)

    def tools(self) -> Tools:
        return Tools(
            ProxmoxApi(
                self.server.url, environ=self.server.provider_env(), timeout=10, sleep=lambda _: time.sleep(0.05)
            ),
            Talosctl(str(self.cluster.talosctl_path), timeout=20, grace=2),
            Kubectl(str(self.cluster.kubectl_path), timeout=20),
            poll=0.05,
        )

    def run(self, hypervisor: str = "pve1", answers=(), **changes) -> tuple[int | OperationError, str, Console]:
        console = Console(out=io.StringIO(), answers=iter(answers))
        try:
            code: int | OperationError = maintain(
                Workspace(self.site, root=self.tmp),
                Terraform(binary="unused"),
                self.options(hypervisor, **changes),
                console,
                self.tools(),
            )
        except OperationError as error:
            code = error
        return code, console.out.getvalue(), console

    # ------------------------------------------------------------------------------------------------ readings
    def node(self, name: str) -> dict:
        objects = json.loads(self.cluster.kube_scenario.read_text())["objects"]["nodes"]
        return next(n for n in objects if n["metadata"]["name"] == name)

    def status(self, vmid: int) -> str:
        return self.machines.statuses()[vmid]

    def talos_calls(self, verb: str) -> list[str]:
        return [c[c.index("--nodes") + 1] for c in self.cluster.talos_calls() if verb in c]

    def kube_calls(self, verb: str) -> list[list[str]]:
        return [c for c in self.cluster.kube_calls() if verb in c[2:3]]
