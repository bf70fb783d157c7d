"""L2 end to end, on loopback: the standalone site validates, synthesizes into ordered stacks, `terravixens deploy`
applies its Proxmox part against two fake Proxmox VE APIs (the site's hypervisor, and the nested host nest1 at the
address and port the topology gives it), and every node's `spec get`, fed the node.env that cloud-init (VMs) or
the hookscript (the container) would write — taken from the snippet the fake host received over SSH — gets its
spec from a running `spec serve` under its posture. Then the lifecycle: a token rotation, a posture change and a
spec edit replace no guest (real plans, exact address sets), drift is found, and destroy goes children first.

What the fakes do not model (so what this cannot show): no guest boots, so cloud-init and the hookscript never
run (the test runs the node.env they would write through the real client instead); fakepve 0.5.0 keeps LXC and
QEMU configuration state but no guest OS, no `pct exec`, no cloud-init ISO; the fake SSH side answers bpg's two
snippet-upload commands and SFTP only (tests/fakessh.py); the nested host is a second fake, not a VM of the first.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
import re
import socket
import stat
import subprocess
import sys
from pathlib import Path

import asyncssh
import pytest
import yaml

from terravixens import provider_install
from terravixens.agent.bundle import built
from terravixens.config.loader import load_site
from terravixens.exitcodes import ExitCode
from terravixens.operations import OperationError
from terravixens.operations.deploy import DeployOptions, deploy
from terravixens.operations.destroy import DestroyOptions, destroy
from terravixens.operations.drift import drift
from terravixens.operations.files import private_process
from terravixens.operations.standalone_env import AGENT_SHA256_ENV, layer_env
from terravixens.operations.terraform import Terraform
from terravixens.operations.workspace import Workspace
from terravixens.standalone.node_env import FIRST_BOOT, render_cloud_config, render_env, site_lines
from terravixens.standalone.resolve import load_standalone
from tests import spec_support
from tests.agent_support import node_root
from tests.cloud_init_tool import cloud_init_schema
from tests.fakepve_ext import FakePveServer
from tests.fakepve_operations import Recorder, api
from tests.fakessh import FakeSsh
from tests.fakessh_node import FakeNode
from tests.loopback import assert_only_loopback, free_port
from tests.terraform import mirrored_providers, projection

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
L0, S, N = "hypervisors", "standalone", "standalone-nest1"
SNIPPETS = "/var/lib/vz/snippets"


def _port_free(host: str, port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def _subnet() -> int:
    """A second octet whose nested host address (127.R.1.60) has the Proxmox port 8006 free."""
    for _ in range(50):
        octet = random.randint(100, 250)
        if _port_free(f"127.{octet}.1.60", 8006):
            return octet
    pytest.fail("no loopback 127.R.1.60 with port 8006 free")


class World:
    """Two fake Proxmox VE hosts with their SSH sides, the site and its specs in a folder, a secrets file."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.octet = _subnet()
        self.hv_host = f"127.{self.octet}.0.2"
        self.nest_host = f"127.{self.octet}.1.60"
        self.spec_host, self.spec_port = f"127.{self.octet}.0.8", 0
        self.pve1 = FakePveServer(self.hv_host, free_port(self.hv_host), folder / "pki1", nodes=("pve1",)).start()
        self.nest1 = FakePveServer(self.nest_host, 8006, folder / "pki2", nodes=("nest1",)).start()
        for fake in (self.pve1, self.nest1):
            fake.call(fake.pve.store_file, "local", "debian-12-genericcloud-amd64.qcow2", 1024, "import")
        self.pve1.call(self.pve1.pve.store_file, "local", "proxmox-ve-9-cloud-amd64.qcow2", 1024, "import")
        self.nest1.call(self.nest1.pve.store_file, "local", "debian-12-standard_12.7-1_amd64.tar.zst", 1024, "vztmpl")
        self.ssh1 = FakeSsh(self.hv_host, folder / "ssh-pve1", self._register(self.pve1)).start()
        self.ssh2 = FakeSsh(self.nest_host, folder / "ssh-nest1", self._register(self.nest1)).start()
        self.ca_bundle = folder / "ca.pem"
        self.ca_bundle.write_text(Path(self.pve1.cafile).read_text() + Path(self.nest1.cafile).read_text())
        self.spec_port = free_port(self.spec_host)
        self.site, self.secrets = self._site()

    @staticmethod
    def _register(fake: FakePveServer):
        return lambda name, size: fake.call(fake.pve.store_file, "local", name, size, "snippets")

    def _site(self) -> tuple[Path, Path]:
        site, secrets = spec_support.standalone_copy(self.folder)
        text = site.read_text().replace("10.11.1.", f"127.{self.octet}.1.").replace("10.12.0.", f"127.{self.octet}.2.")
        data = yaml.safe_load(text)
        data["proxmox"] = {"endpoint": self.pve1.url, "insecure": False}
        data["standalone"]["spec_server"] = {
            "url": f"http://{self.spec_host}:{self.spec_port}",
            "allow_insecure_http": "a test on loopback",
        }
        site.write_text(yaml.safe_dump(data, sort_keys=False))
        return site, secrets

    def transform(self, layer: str, document: dict) -> dict:
        """The stack projected onto the mirrored providers, with bpg's SSH pointed at the fake host's SSH port."""
        projected, dropped = projection(document, mirrored_providers())
        assert not {d for d in dropped if not d.startswith("output.")}, dropped  # L0/L2 here: proxmox only
        provider = projected.get("provider", {}).get("proxmox", [{}])[0]
        if layer == N:
            assert provider["ssh"]["node"] == [{"name": "nest1", "address": self.nest_host}]  # from the topology
            provider["ssh"]["node"][0]["port"] = self.ssh2.port
        elif provider:
            provider["ssh"] = {"node": [{"name": "pve1", "address": self.hv_host, "port": self.ssh1.port}]}
        assert_only_loopback(projected)
        return projected

    def workspace(self) -> Workspace:
        return Workspace(load_site(self.site), root=self.folder, transform=self.transform)

    def terraform(self, binary: str) -> Terraform:
        home = self.folder / "home"  # bpg writes the fake hosts' keys to ~/.ssh/known_hosts
        home.mkdir(exist_ok=True)
        env = {
            **self.pve1.provider_env(),
            **provider_install.environment_for("mirror"),
            "HOME": str(home),
            "SSL_CERT_FILE": str(self.ca_bundle),
        }
        # Each layer's apply-time variables as `terravixens deploy` gives them (tokens, the agent bundle's hash).
        variables = layer_env(load_site(self.site), str(self.site), str(self.secrets), None)
        return Terraform(binary=binary, env=env, layer_env=variables)

    def snippet(self, ssh: FakeSsh, node: str, suffix: str) -> str:
        return ssh.read(f"{SNIPPETS}/terravixens-{node}.{suffix}")

    def inventory(self) -> dict:
        def read(fake):
            pve = fake.pve
            return {
                "vms": sorted(vm.vmid for vm in pve.vms),
                "cts": sorted(ct.vmid for ct in pve.cts),
                "snippets": sorted(
                    name.split("/", 1)[1]
                    for name, vol in pve.storages["local"].get("volumes", {}).items()
                    if vol.get("content") == "snippets"
                ),
            }

        return {"pve1": self.pve1.call(read, self.pve1), "nest1": self.nest1.call(read, self.nest1)}

    def stop(self) -> None:
        for server in (self.ssh1, self.ssh2, self.pve1, self.nest1):
            server.stop()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    previous = private_process()
    created = World(tmp_path_factory.mktemp("l2"))
    yield created
    created.stop()
    os.umask(previous)


@pytest.fixture(scope="module")
def deployed(world, terraform_binary):
    validate = subprocess.run(
        [sys.executable, "-m", "terravixens.cli", "validate", "--site", str(world.site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert validate.returncode == 0, validate.stderr
    assert "4 standalone nodes" in validate.stdout
    stacks = subprocess.run(
        [sys.executable, "-m", "terravixens.cli", "stacks", "--site", str(world.site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert stacks.stdout.split() == [L0, S, N]
    console = Recorder()
    code = deploy(world.workspace(), None, world.terraform(terraform_binary), DeployOptions(yes=True), console)
    assert code == ExitCode.OK, console.text
    return console.text


def node_env_of(world: World, node: str) -> str:
    """The node.env the node's carrier writes: cloud-init's write_files content, or the hookscript's heredoc."""
    if node == "dns1":
        script = world.snippet(world.ssh2, "dns1", "sh")
        return re.search(r"<<'TERRAVIXENS_NODE_ENV'\n(.*?)TERRAVIXENS_NODE_ENV\n", script, re.S).group(1)
    ssh = world.ssh2 if node == "jump1" else world.ssh1
    cloud_config = yaml.safe_load(world.snippet(ssh, node, "yaml"))
    entry, _bootstrap = cloud_config["write_files"]
    assert (entry["path"], entry["owner"], entry["permissions"]) == ("/etc/terravixens/node.env", "root:root", "0600")
    return entry["content"]


def test_the_vendor_data_terraform_wrote_passes_cloud_init_schema(deployed, world, tmp_path):
    """What the fake hosts received over SSH — Terraform's own format() of cloud_config_format() — is valid for
    Debian's cloud-init and is render_cloud_config's text (tests/test_cloud_init_schema.py validates that one), the
    agent bundle pinned being the installed terravixens' (ADR 0059)."""
    url = f"http://{world.spec_host}:{world.spec_port}"
    tokens = {"nest1": spec_support.NODE_TOKENS["nest1"], "tools": None, "jump1": spec_support.SITE_TOKEN}
    lines = site_lines(True, None)
    for node, ssh in (("nest1", world.ssh1), ("tools", world.ssh1), ("jump1", world.ssh2)):
        path = tmp_path / f"{node}.yaml"
        path.write_text(world.snippet(ssh, node, "yaml"))
        ran = cloud_init_schema(path)
        assert ran.returncode == 0 and "Valid cloud-config" in ran.stdout, (node, ran.stdout, ran.stderr)
        assert yaml.safe_load(path.read_text())["runcmd"] == [FIRST_BOOT]
        assert path.read_text() == render_cloud_config(url, node, tokens[node], built()[1], lines), node


def test_deploy_applies_the_layers_in_order_parents_first(deployed, world):
    order = re.findall(r"\] (\S+): done$", deployed, re.M)
    assert order == [L0, S, N]
    assert "standalone: summary — 4 to create" in deployed and "standalone-nest1: summary — 4 to create" in deployed
    assert "  standalone dns1:\n    + proxmox_virtual_environment_container.sa_dns1_ct" in deployed
    assert world.inventory() == {
        "pve1": {"vms": [3001, 3002], "cts": [], "snippets": ["terravixens-nest1.yaml", "terravixens-tools.yaml"]},
        "nest1": {"vms": [102], "cts": [101], "snippets": ["terravixens-dns1.sh", "terravixens-jump1.yaml"]},
    }
    ct = world.nest1.call(lambda: dict(world.nest1.pve.ct(101).config))
    assert (ct["unprivileged"], ct["hookscript"], ct["ostype"]) == (1, "local:snippets/terravixens-dns1.sh", "debian")
    vm = world.nest1.call(lambda: dict(world.nest1.pve.vm(102).config))
    assert vm["cicustom"] == "vendor=local:snippets/terravixens-jump1.yaml"
    assert vm["ipconfig0"] == f"gw=127.{world.octet}.1.1,ip=127.{world.octet}.1.61/24"
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (world.ssh2.root / SNIPPETS.lstrip("/")).iterdir()}
    assert modes == {"terravixens-dns1.sh": 0o700, "terravixens-jump1.yaml": 0o600}
    assert {stat.S_IMODE(p.stat().st_mode) for p in (world.folder / "state").glob("*.tfstate")} == {0o600}


def test_a_second_deploy_has_nothing_to_do(deployed, world, terraform_binary):
    console = Recorder()
    assert (
        deploy(
            world.workspace(), None, world.terraform(terraform_binary), DeployOptions(yes=True, synth=False), console
        )
        == ExitCode.OK
    )
    assert "deployed: nothing (no changes)" in console.text, console.text


def test_each_node_gets_its_identity_and_the_token_its_posture_asks_for(deployed, world):
    url = f"http://{world.spec_host}:{world.spec_port}"
    expected = {
        "nest1": spec_support.NODE_TOKENS["nest1"],
        "tools": None,
        "jump1": spec_support.SITE_TOKEN,
        "dns1": spec_support.NODE_TOKENS["dns1"],
    }
    server = load_site(world.site).standalone.spec_server
    assert server is not None
    lines = site_lines(bool(server.allow_insecure_http), server.ca_data)
    assert "TERRAVIXENS_ALLOW_INSECURE_HTTP=yes" in lines  # this site's spec server is plain http, with a reason
    for node, token in expected.items():
        pinned = None if node == "dns1" else built()[1]  # a container runs no first boot: nothing pinned
        assert node_env_of(world, node) == render_env(url, node, token, lines, pinned), node


def spec_get(env_text: str, folder: Path, name: str) -> tuple[subprocess.CompletedProcess, Path]:
    env_file, out = folder / f"{name}.env", folder / f"{name}.spec.json"
    env_file.write_text(env_text)
    env_file.chmod(0o600)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "terravixens.cli",
            "spec",
            "get",
            "--env-file",
            str(env_file),
            "--out",
            str(out),
            "--max-time",
            "20",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done, out


@pytest.fixture(scope="module")
def spec_server(world, deployed):
    server = spec_support.start_server(
        world.site, world.secrets, world.folder / "serve.log", host=world.spec_host, port=world.spec_port
    )
    yield server
    server.stop()


def test_every_node_gets_its_spec_from_the_running_server_under_its_posture(world, spec_server, tmp_path):
    documents = load_standalone(world.site, world.secrets).documents
    postures = {}
    for node in ("nest1", "tools", "jump1", "dns1"):
        done, out = spec_get(node_env_of(world, node), tmp_path, node)
        assert done.returncode == 0, done.stderr
        assert json.loads(out.read_text()) == documents[node]
        assert stat.S_IMODE(out.stat().st_mode) == 0o600
        postures[node] = (documents[node]["access"]["posture"], documents[node]["access"]["auth"])
    assert postures == {
        "nest1": ("prod", "node_token"),
        "tools": ("dev", "network"),
        "jump1": ("stage", "site_token"),
        "dns1": ("prod", "node_token"),
    }
    served = [r for r in spec_server.log() if r.get("event") == "access" and r.get("status") == 200]
    assert {r.get("identity") for r in served} >= {"nest1", "tools", "jump1", "dns1"}


def test_a_node_env_carrying_another_nodes_token_is_refused(world, spec_server, tmp_path):
    url = f"http://{world.spec_host}:{world.spec_port}"
    cases = {  # identity, token -> spec get's exit code (ADR 0019: 4 refused)
        ("jump1", spec_support.NODE_TOKENS["dns1"]): 4,  # stage node with a node token
        ("dns1", spec_support.NODE_TOKENS["jump1"]): 4,  # another node's token
        ("dns1", spec_support.SITE_TOKEN): 4,  # prod node with the site token
        ("nest1", None): 4,  # prod node without a token
        ("tools", spec_support.WRONG_TOKEN): 4,  # network posture, invalid token
    }
    for (node, token), code in cases.items():
        done, out = spec_get(render_env(url, node, token), tmp_path, f"{node}-bad")
        assert done.returncode == code, (node, token, done.stderr)
        assert not out.exists()


def plan_changes(path: Path) -> dict[str, tuple[str, ...]]:
    plan = json.loads(path.read_text())
    return {
        c["address"]: tuple(c["change"]["actions"])
        for c in plan["resource_changes"]
        if c["change"]["actions"] != ["no-op"]
    }


def test_rotating_a_node_token_replaces_only_its_snippet_and_the_container_stays(deployed, world, terraform_binary):
    before = world.inventory()
    ct_before = world.nest1.call(lambda: dict(world.nest1.pve.ct(101).config))
    rotated = "dns1-rotated-" + "7" * 32
    spec_support.write_secrets(
        world.secrets, spec_support.secrets_data(node_tokens={**spec_support.NODE_TOKENS, "dns1": rotated})
    )
    console = Recorder()
    assert (
        deploy(
            world.workspace(),
            [S, N],
            world.terraform(terraform_binary),
            DeployOptions(yes=True, save_plan_json=world.folder / "rotate.json"),
            console,
        )
        == ExitCode.OK
    )
    assert "standalone: plan — no changes" in console.text
    assert plan_changes(world.folder / "rotate-standalone-nest1.json") == {
        "proxmox_virtual_environment_file.sa_dns1_node_env": ("delete", "create")
    }
    assert world.inventory() == before
    assert world.nest1.call(lambda: dict(world.nest1.pve.ct(101).config)) == ct_before
    assert f"TERRAVIXENS_TOKEN='{rotated}'" in world.snippet(world.ssh2, "dns1", "sh")


def test_a_posture_change_replaces_only_that_nodes_snippet_and_the_vm_stays(deployed, world, terraform_binary):
    spec = world.site.parent / "specs" / "tools.yaml"
    data = yaml.safe_load(spec.read_text())
    data["access"]["posture"] = "stage"
    spec.write_text(yaml.safe_dump(data))
    vm_before = world.pve1.call(lambda: dict(world.pve1.pve.vm(3002).config))
    console = Recorder()
    assert (
        deploy(
            world.workspace(),
            [S, N],
            world.terraform(terraform_binary),
            DeployOptions(yes=True, save_plan_json=world.folder / "posture.json"),
            console,
        )
        == ExitCode.OK
    )
    assert plan_changes(world.folder / "posture-standalone.json") == {
        "proxmox_virtual_environment_file.sa_tools_node_env": ("delete", "create")
    }
    assert "standalone-nest1: plan — no changes" in console.text
    assert world.pve1.call(lambda: dict(world.pve1.pve.vm(3002).config)) == vm_before
    assert f"TERRAVIXENS_TOKEN='{spec_support.SITE_TOKEN}'" in node_env_of(world, "tools")


def test_a_spec_edit_changes_nothing_terraform_manages(deployed, world, terraform_binary):
    spec = world.site.parent / "specs" / "jump.yaml"
    data = yaml.safe_load(spec.read_text())
    data["platform"]["packages"].append("tmux")
    spec.write_text(yaml.safe_dump(data))
    console = Recorder()
    assert (
        deploy(world.workspace(), [S, N], world.terraform(terraform_binary), DeployOptions(yes=True), console)
        == ExitCode.OK
    )
    assert "deployed: nothing (no changes)" in console.text, console.text


def test_drift_on_a_guest_is_found_and_named(deployed, world, terraform_binary):
    tf, ws = world.terraform(terraform_binary), world.workspace()
    assert drift(ws, [S, N], tf, Recorder()) == 0
    api(world.nest1, "PUT", "/nodes/nest1/qemu/102/config", onboot="0")
    console = Recorder()
    assert drift(ws, [S, N], tf, console, synth=False) == 2
    assert "standalone: drift — in sync" in console.text
    assert "  standalone jump1:\n    ~ proxmox_virtual_environment_vm.sa_jump1_vm (on_boot)" in console.text
    assert deploy(ws, [N], tf, DeployOptions(yes=True, synth=False), Recorder()) == ExitCode.OK
    assert world.nest1.call(lambda: world.nest1.pve.vm(102).config["onboot"]) in (1, "1")


def test_push_round_trip_on_the_created_vm(deployed, world, spec_server, tmp_path):
    """The design's spec-vm-push-roundtrip: the VM `tools` created on the fake Proxmox VE (deployed), then `spec
    push tools` to the address the site gives it — a fake node's SSH side there (tests/fakessh_node.py: a bare
    python3 on a throwaway root) — and its JSON result; destroy follows (test_destroy_goes_children_first).
    A real VM would boot, run the vendor data's first boot, and answer on port 22 with its own host key."""
    assert 3002 in world.inventory()["pve1"]["vms"]
    address = f"127.{world.octet}.1.62"
    root, tools = node_root(tmp_path / "tools")
    # The node.env its vendor data wrote: the spec server the agent checks its network change against (ADR 0059).
    env = root / "etc/terravixens/node.env"
    env.parent.mkdir(parents=True)
    env.write_text(node_env_of(world, "tools"))
    env.chmod(0o600)
    # tools has two NICs in the site (VLANs 111 and 120): the links its kernel would list.
    links = [
        {"ifindex": 1, "ifname": "lo", "link_type": "loopback", "address": "00:00:00:00:00:00"},
        {"ifindex": 2, "ifname": "ens18", "link_type": "ether", "address": "bc:24:11:5e:00:01"},
        {"ifindex": 3, "ifname": "ens19", "link_type": "ether", "address": "bc:24:11:5e:00:02"},
    ]
    (root / "var/lib/standin/links.json").write_text(json.dumps(links))
    key = asyncssh.generate_private_key("ssh-ed25519")
    identity = tmp_path / "id_ed25519"
    identity.write_bytes(key.export_private_key())
    identity.chmod(0o600)
    node = FakeNode(address, root, tools, key).start()
    try:
        known = tmp_path / "known_hosts"
        known.write_text(node.known_hosts_line())
        argv = [sys.executable, "-m", "terravixens.cli", "spec", "push", "tools", "--site", str(world.site)]
        argv += ["--secrets", str(world.secrets), "--port", str(node.port), "--identity", str(identity)]
        argv += ["--known-hosts", str(known), "--json"]
        ran = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert ran.returncode == 0, ran.stdout + ran.stderr
        result = json.loads(ran.stdout)
        assert (result["identity"], result["ok"], result["mode"]) == ("tools", True, "apply")
        assert {s["name"] for s in result["sections"] if s["changes"]} >= {"hostname", "packages", "network", "run"}
        assert (root / "etc/hostname").read_text() == "tools\n"
        again = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert again.returncode == 0 and json.loads(again.stdout)["changed"] == 0
    finally:
        node.stop()


def test_a_new_agent_bundle_replaces_only_the_vms_snippets_and_no_guest(deployed, world, terraform_binary):
    """Another terravixens (another bundle hash at deploy) replaces each VM's vendor data and nothing else: no guest,
    no container's hookscript (ADR 0059). And back again, the same set."""
    vms_before = {
        "pve1": world.pve1.call(lambda: {vm.vmid: dict(vm.config) for vm in world.pve1.pve.vms}),
        "nest1": world.nest1.call(lambda: {vm.vmid: dict(vm.config) for vm in world.nest1.pve.vms}),
    }
    hookscript = world.snippet(world.ssh2, "dns1", "sh")
    tf = world.terraform(terraform_binary)
    other = hashlib.sha256(b"the next terravixens").hexdigest()
    next_version = dataclasses.replace(
        tf,
        layer_env={
            layer: {**env, AGENT_SHA256_ENV: other} if AGENT_SHA256_ENV in env else env
            for layer, env in tf.layer_env.items()
        },
    )
    assert {layer for layer, env in next_version.layer_env.items() if AGENT_SHA256_ENV in env} == {S, N}
    for terraform, name in ((next_version, "bundle"), (tf, "back")):
        console = Recorder()
        options = DeployOptions(yes=True, save_plan_json=world.folder / f"{name}.json")
        assert deploy(world.workspace(), [S, N], terraform, options, console) == ExitCode.OK, console.text
        assert plan_changes(world.folder / f"{name}-standalone.json") == {
            "proxmox_virtual_environment_file.sa_nest1_node_env": ("delete", "create"),
            "proxmox_virtual_environment_file.sa_tools_node_env": ("delete", "create"),
        }
        assert plan_changes(world.folder / f"{name}-standalone-nest1.json") == {
            "proxmox_virtual_environment_file.sa_jump1_node_env": ("delete", "create")
        }
    assert f"TERRAVIXENS_AGENT_SHA256={built()[1]}" in node_env_of(world, "jump1")
    assert world.snippet(world.ssh2, "dns1", "sh") == hookscript
    assert {
        "pve1": world.pve1.call(lambda: {vm.vmid: dict(vm.config) for vm in world.pve1.pve.vms}),
        "nest1": world.nest1.call(lambda: {vm.vmid: dict(vm.config) for vm in world.nest1.pve.vms}),
    } == vms_before


def test_destroy_goes_children_first(deployed, world, terraform_binary):
    tf, ws = world.terraform(terraform_binary), world.workspace()
    with pytest.raises(OperationError) as caught:
        destroy(ws, S, tf, DestroyOptions(confirm="lab/standalone"), Recorder())
    assert caught.value.code == ExitCode.REFUSED
    assert (
        "standalone: layer standalone-nest1 still has 4 resources on a host that standalone creates: destroy "
        "standalone-nest1 first (children before parents); nothing was destroyed"
    ) in str(caught.value)
    assert world.inventory()["pve1"]["vms"] == [3001, 3002]
    console = Recorder()
    assert destroy(ws, N, tf, DestroyOptions(confirm="lab/standalone-nest1", synth=False), console) == ExitCode.OK
    assert world.inventory()["nest1"] == {"vms": [], "cts": [], "snippets": []}
    assert destroy(ws, S, tf, DestroyOptions(confirm="lab/standalone", synth=False), Recorder()) == ExitCode.OK
    assert world.inventory() == {
        "pve1": {"vms": [], "cts": [], "snippets": []},
        "nest1": {"vms": [], "cts": [], "snippets": []},
    }
