"""The agent applies the spec's `network` (issue 30 item 3, ADR 0059), on a throwaway root with the stand-in managers
(ip, netplan, ifup, ifdown: tests/agent_standins/standin.py), checked against a real `terravixens spec serve` on
loopback reached through a proxy that plays the node's network: it passes a connection only while the addresses
the stand-ins applied (var/lib/standin/network.json) still reach the server, as a real node's would.

Each renderer — a VM's netplan, a VM's ifupdown, a container's own files — is shown to take a node as its image left
it to the spec's network (exact files, cloud-init's own file moved aside, what is applied) and to change nothing on a
second run; a change that would cut the node off from its spec server is rolled back, files byte for byte.
What a real node adds: the kernel's addresses and routes, netplan's own validation of every key, ifupdown's state
file, systemd-resolved; the proxy stands for the network between the node and its server.
"""

from __future__ import annotations

import http.client
import http.server
import json
import threading
from pathlib import Path

import pytest

from terravixens.agent import desired, network
from terravixens.agent.converge import converge
from terravixens.agent.system import Node
from terravixens.standalone.node_env import render_env
from tests import loopback, spec_support
from tests.agent_support import MAC, agent, calls, mutations, node_root, spec_document

KEPT_NETWORK = "10.11.1.53/24"
CLOUD_INIT_NETPLAN = """# This file is generated from information provided by the datasource.  Changes
# to it will not persist across an instance reboot.
network:
    version: 2
    ethernets:
        eth0:
            match:
                macaddress: bc:24:11:5e:00:01
            set-name: ens18
            addresses:
            - 10.11.1.53/24
            routes:
            -   to: default
                via: 10.11.1.1
"""


class Reach(http.server.ThreadingHTTPServer):
    """The node's network, as far as its spec server is concerned: a loopback proxy that passes GET requests to the
    server only while `reaches(applied)` holds for what the stand-ins applied on the node; otherwise it drops the
    connection unanswered (the agent sees what a cut route gives it: no answer)."""

    daemon_threads = True

    def __init__(self, upstream: spec_support.Server, root: Path, reaches):
        self.upstream, self.root, self.reaches = upstream, root, reaches
        super().__init__(("127.0.0.1", 0), ReachHandler)
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def applied(self) -> dict:
        state = self.root / "var/lib/standin/network.json"
        return json.loads(state.read_text())["applied"] if state.exists() else {}

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        self.thread.join(timeout=10)


class ReachHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        reach: Reach = self.server  # type: ignore[assignment]
        if not reach.reaches(reach.applied()):
            self.close_connection = True
            return
        connection = http.client.HTTPConnection(reach.upstream.host, reach.upstream.port, timeout=10)
        connection.request("GET", self.path)
        answer = connection.getresponse()
        body = answer.read()
        connection.close()
        self.send_response(answer.status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("network")
    site, secrets = spec_support.standalone_copy(folder)
    running = spec_support.start_server(site, secrets, folder / "serve.log")
    yield running
    running.stop()


def holds(address: str = KEPT_NETWORK):
    """Reachable while some applied interface has `address`."""
    return lambda applied: any(address in settings.get("addresses", []) for settings in applied.values())


@pytest.fixture
def settle(monkeypatch):
    monkeypatch.setattr(network, "SETTLE_SECONDS", 2.0)
    monkeypatch.setattr(network, "PAUSE_SECONDS", 0.2)


def stock(tmp_path: Path, kind: str) -> tuple[Path, Path]:
    """A node as its image and Proxmox left it: cloud-init's netplan (vm), cloud-init's ifupdown stanza (vm-eni) or
    PVE's interfaces (ct), already up with the site's address."""
    root, tools = node_root(tmp_path, network=False)
    applied = {"addresses": [KEPT_NETWORK], "routes": [{"to": "default", "via": "10.11.1.1"}]}
    if kind == "vm":
        (root / "etc/netplan").mkdir(parents=True)
        (root / "etc/netplan/50-cloud-init.yaml").write_text(CLOUD_INIT_NETPLAN)
        (root / "etc/netplan/50-cloud-init.yaml").chmod(0o600)
        name = "ens18"
    elif kind == "vm-eni":
        (root / "etc/network/interfaces.d").mkdir(parents=True)
        (root / "etc/network/interfaces").write_text(
            "source /etc/network/interfaces.d/*\n\nauto lo\niface lo inet loopback\n"
        )
        (root / "etc/network/interfaces.d/50-cloud-init").write_text(
            "auto ens18\niface ens18 inet static\n    address 10.11.1.53/24\n    gateway 10.11.1.1\n"
        )
        (root / "etc/resolv.conf").write_text("nameserver 10.11.1.1\n")
        name = "ens18"
    else:
        (root / "etc/network").mkdir(parents=True)
        (root / "etc/network/interfaces").write_text(
            "auto lo\niface lo inet loopback\n\nauto eth0\niface eth0 inet static\n\taddress 10.11.1.53/24\n"
            "\tgateway 10.11.1.1\n"
        )
        (root / "etc/resolv.conf").write_text("# --- BEGIN PVE ---\nnameserver 10.11.1.1\n# --- END PVE ---\n")
        name = "eth0"
    (root / "var/lib/standin/network.json").write_text(json.dumps({"applied": {name: applied}}))
    return root, tools


def node_env(root: Path, url: str) -> None:
    env = root / "etc/terravixens/node.env"
    env.parent.mkdir(parents=True, exist_ok=True)
    env.write_text(render_env(url, "dns1", spec_support.NODE_TOKENS["dns1"]))
    env.chmod(0o600)


def spec(node_type: str, **network_settings) -> dict:
    document = spec_document(node_type=node_type, users={}, packages=[], enable=[])
    document["network"].update(
        {
            "dns": ["10.11.1.53"],
            "search": ["lab.internal"],
            "routes": [{"to": "10.20.0.0/16", "via": "10.11.1.254"}],
            "interfaces": [{"address": "10.11.1.53/24", "gateway": "10.11.1.1"}],
            **network_settings,
        }
    )
    return document


def run(root: Path, tools: Path, document: dict, dry_run: bool = False) -> dict:
    return converge(Node(root, tools), desired.read(document), dry_run=dry_run).document()


def section(result: dict) -> dict:
    return next(s for s in result["sections"] if s["name"] == "network")


def files(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): path.read_text()
        for folder in ("etc/netplan", "etc/network", "etc/cloud", "var/lib/terravixens/network")
        for path in sorted((root / folder).rglob("*"))
        if path.is_file()
    } | ({"etc/resolv.conf": (root / "etc/resolv.conf").read_text()} if (root / "etc/resolv.conf").exists() else {})


NETPLAN = """# terravixens: managed by the agent from the spec (ADR 0059); edits are replaced
network:
  version: 2
  ethernets:
    ens18:
      match:
        macaddress: "bc:24:11:5e:00:01"
      set-name: "ens18"
      addresses:
        - "10.11.1.53/24"
      routes:
        - to: "default"
          via: "10.11.1.1"
        - to: "10.20.0.0/16"
          via: "10.11.1.254"
      nameservers:
        addresses:
          - "10.11.1.53"
        search:
          - "lab.internal"
"""
STANZA = """auto {name}
iface {name} inet static
    address 10.11.1.53/24
    gateway 10.11.1.1
    up ip route replace 10.20.0.0/16 via 10.11.1.254 dev {name}
    down ip route del 10.20.0.0/16 via 10.11.1.254 dev {name} || true
"""
RESOLV = "# terravixens: managed by the agent from the spec (ADR 0059); edits are replaced\n"
RESOLV += "search lab.internal\nnameserver 10.11.1.53\n"


def test_a_vm_with_netplan_takes_the_spec_then_changes_nothing(tmp_path, server):
    root, tools = stock(tmp_path, "vm")
    reach = Reach(server, root, holds())
    try:
        node_env(root, reach.url)
        first = run(root, tools, spec("vm"))
        assert first["ok"], first
        [change] = section(first)["changes"]
        assert change == (
            "create /etc/netplan/90-terravixens.yaml; create /etc/cloud/cloud.cfg.d/99-terravixens-network.cfg; "
            "move cloud-init's /etc/netplan/50-cloud-init.yaml to /var/lib/terravixens/network; netplan apply (the "
            "spec server must answer after it, else rolled back)"
        )
        assert files(root) == {
            "etc/netplan/90-terravixens.yaml": NETPLAN,
            "etc/cloud/cloud.cfg.d/99-terravixens-network.cfg": network.CLOUD_INIT_OFF_TEXT,
            "var/lib/terravixens/network/50-cloud-init.yaml": CLOUD_INIT_NETPLAN,
        }
        assert (root / "etc/netplan/90-terravixens.yaml").stat().st_mode & 0o777 == 0o600
        # What netplan applied: our file alone (cloud-init's, left in place, would have added its address again).
        assert reach.applied() == {
            "ens18": {
                "addresses": ["10.11.1.53/24"],
                "routes": [{"to": "default", "via": "10.11.1.1"}, {"to": "10.20.0.0/16", "via": "10.11.1.254"}],
                "nameservers": {"addresses": ["10.11.1.53"], "search": ["lab.internal"]},
            }
        }
        assert ["netplan", "generate"] in calls(root) and ["netplan", "apply"] in calls(root)
        done = len(calls(root))
        second = run(root, tools, spec("vm"))
        assert second["ok"] and section(second)["changes"] == [] and second["changed"] == 0
        assert mutations(root, since=done) == []
    finally:
        reach.stop()


def test_a_vm_with_ifupdown_takes_the_spec_then_changes_nothing(tmp_path, server):
    root, tools = stock(tmp_path, "vm-eni")
    reach = Reach(server, root, holds())
    try:
        node_env(root, reach.url)
        first = run(root, tools, spec("vm"))
        assert first["ok"], first
        assert files(root) == {
            "etc/network/interfaces": "source /etc/network/interfaces.d/*\n\nauto lo\niface lo inet loopback\n",
            "etc/network/interfaces.d/90-terravixens": network.MANAGED + STANZA.format(name="ens18"),
            "etc/cloud/cloud.cfg.d/99-terravixens-network.cfg": network.CLOUD_INIT_OFF_TEXT,
            "var/lib/terravixens/network/50-cloud-init": (
                "auto ens18\niface ens18 inet static\n    address 10.11.1.53/24\n    gateway 10.11.1.1\n"
            ),
            "etc/resolv.conf": RESOLV,
        }
        ups = [call for call in calls(root) if call[0] in ("ifdown", "ifup")]
        assert ups == [["ifdown", "--force", "ens18"], ["ifup", "ens18"]]  # down with the files it came up with
        assert reach.applied()["ens18"] == {
            "addresses": ["10.11.1.53/24"],
            "gateway": "10.11.1.1",
            "routes": [["10.20.0.0/16", "10.11.1.254"]],
        }
        done = len(calls(root))
        second = run(root, tools, spec("vm"))
        assert second["ok"] and second["changed"] == 0 and mutations(root, since=done) == []
    finally:
        reach.stop()


def test_a_container_takes_the_spec_in_its_own_files_then_changes_nothing(tmp_path, server):
    root, tools = stock(tmp_path, "ct")
    reach = Reach(server, root, holds())
    try:
        node_env(root, reach.url)
        document = spec("ct")
        document["config"]["ct"]["regenerate_host_keys"] = False
        first = run(root, tools, document)
        assert first["ok"], first
        assert files(root) == {
            "etc/network/interfaces": (
                network.MANAGED + "auto lo\niface lo inet loopback\n\n" + STANZA.format(name="eth0")
            ),
            "etc/network/.pve-ignore.interfaces": "",
            "etc/resolv.conf": RESOLV,
        }
        assert (root / "etc/.pve-ignore.resolv.conf").read_text() == ""  # PVE leaves both files alone from now on
        assert not (root / "etc/cloud").exists()  # a container has no cloud-init
        done = len(calls(root))
        second = run(root, tools, document)
        assert second["ok"] and second["changed"] == 0 and mutations(root, since=done) == []
    finally:
        reach.stop()


@pytest.mark.parametrize("kind", ["vm", "vm-eni", "ct"])
def test_a_change_that_cuts_the_spec_server_off_is_rolled_back(tmp_path, server, settle, kind):
    """The spec moves the node to 10.11.1.99/24; the network (the proxy) only reaches the server from .53: after the
    change the server stays silent, so the previous files are put back, applied again, and the node answers."""
    root, tools = stock(tmp_path, kind)
    reach = Reach(server, root, holds())
    try:
        node_env(root, reach.url)
        before = files(root)
        applied = reach.applied()
        moved = spec(
            "ct" if kind == "ct" else "vm",
            routes=[],
            interfaces=[{"address": "10.11.1.99/24", "gateway": "10.11.1.1"}],
        )
        result = run(root, tools, moved)
        assert not result["ok"] and section(result)["changes"] == []
        failed = section(result)["failed"]
        assert failed.endswith(
            "did not answer within 2 s of the change (RemoteDisconnected: Remote end closed connection without "
            "response): the previous files are restored and applied again (the previous network is back)"
        ), failed
        assert files(root) == before  # byte for byte, cloud-init's file back in place
        assert reach.applied() == applied or [s["addresses"] for s in reach.applied().values()] == [[KEPT_NETWORK]]
        assert [s["name"] for s in result["sections"] if s["failed"]] == ["network"]  # the others are applied
    finally:
        reach.stop()


def test_a_network_the_new_files_do_not_bring_up_is_rolled_back(tmp_path, server, settle):
    """netplan refuses the files as a whole (another file of /etc/netplan does not parse): nothing is left half
    applied — the previous files are back and applied."""
    root, tools = stock(tmp_path, "vm")
    reach = Reach(server, root, holds())
    try:
        node_env(root, reach.url)
        before = files(root)
        (root / "etc/netplan/60-broken.yaml").write_text("network: [unclosed\n")
        before["etc/netplan/60-broken.yaml"] = "network: [unclosed\n"
        result = run(root, tools, spec("vm"))
        failed = section(result)["failed"]
        assert "netplan generate failed: " in failed and "the previous files are restored and applied again" in failed
        assert files(root) == before
    finally:
        reach.stop()


def test_without_a_spec_server_to_check_against_nothing_changes(tmp_path, server):
    root, tools = stock(tmp_path, "vm")
    before = files(root)
    result = run(root, tools, spec("vm"))
    assert section(result)["failed"] == (
        "create /etc/netplan/90-terravixens.yaml; create /etc/cloud/cloud.cfg.d/99-terravixens-network.cfg; move "
        "cloud-init's /etc/netplan/50-cloud-init.yaml to /var/lib/terravixens/network; netplan apply (the spec server "
        "must answer after it, else rolled back): no /etc/terravixens/node.env names a spec server to check the "
        "change against (the L2 stacks write it): nothing changed"
    )
    assert files(root) == before and not [c for c in calls(root) if c[0] == "netplan"]
    port = loopback.free_port("127.0.0.1")  # nobody listens: silent before the change
    node_env(root, f"http://127.0.0.1:{port}")
    result = run(root, tools, spec("vm"))
    assert "does not answer before the change" in section(result)["failed"]
    assert section(result)["failed"].endswith("nothing changed") and files(root) == before


def test_dry_run_lists_the_network_change_and_changes_nothing(tmp_path, server):
    root, tools = stock(tmp_path, "vm")
    before = files(root)
    result = run(root, tools, spec("vm"), dry_run=True)
    assert section(result)["changes"][0].startswith("create /etc/netplan/90-terravixens.yaml; ")
    assert files(root) == before and mutations(root) == []


def test_a_nested_pve_hosts_network_is_left_alone(tmp_path):
    root, tools = stock(tmp_path, "vm")
    document = spec("vm")
    document["node"]["type"] = "pve"
    document["config"] = {"pve": {"repository": "none"}}
    assert section(run(root, tools, document)) == {"name": "network", "changes": [], "failed": None}


def test_a_vm_with_fewer_nics_than_addresses_is_refused(tmp_path):
    root, tools = stock(tmp_path, "vm")
    two = spec("vm", interfaces=[{"address": "10.11.1.53/24", "gateway": "10.11.1.1"}, {"address": "10.12.0.5/24"}])
    assert section(run(root, tools, two))["failed"] == (
        "configure the network: the VM has 1 ethernet interface(s) (ens18) and the site gives it 2 address(es): "
        "check the VM's network devices"
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"routes": [{"to": "10.20.0.1/16", "via": "10.11.1.254"}]}, "is not a network in CIDR notation"),
        ({"routes": [{"to": "0.0.0.0/0", "via": "10.11.1.254"}]}, "is a default route"),
        ({"routes": [{"to": "10.20.0.0/16", "via": "10.99.0.1"}]}, "10.99.0.1 is on no subnet of this node"),
        ({"interfaces": [{"address": "10.11.1.53", "gateway": None}]}, "is not an address with its prefix"),
        ({"interfaces": [{"address": "10.11.1.53/24", "gateway": "10.12.0.1"}]}, "is outside 10.11.1.0/24"),
        ({"dns": ["resolver.lab"]}, "network.dns[0]: 'resolver.lab' is not an IP address"),
    ],
)
def test_a_bad_network_is_refused_before_anything_changes(tmp_path, change, message):
    root, tools = stock(tmp_path, "vm")
    document = spec("vm", **change)
    ran = agent(root, tools, "converge", "--spec", "-", stdin=json.dumps(document))
    assert ran.returncode == 2 and message in ran.stderr and ran.stderr.count("\n") == 1, ran.stderr
    assert calls(root) == []


def test_the_stand_in_netplan_concatenates_what_two_files_give_one_interface(tmp_path):
    """The fidelity the move of cloud-init's file rests on (netplan-generate(8): sequences are concatenated)."""
    root, tools = stock(tmp_path, "vm")
    (root / "etc/netplan/90-more.yaml").write_text(
        "network:\n  ethernets:\n    eth0:\n      addresses: [10.11.1.60/24]\n"
    )
    ran = Node(root, tools).call("netplan", "apply")
    assert ran.ok
    assert json.loads((root / "var/lib/standin/network.json").read_text())["applied"]["eth0"]["addresses"] == [
        "10.11.1.53/24",
        "10.11.1.60/24",
    ]
    assert MAC in CLOUD_INIT_NETPLAN
