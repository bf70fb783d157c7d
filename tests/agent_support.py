"""A throwaway node root and the stand-ins for its managers (tests/agent_standins/standin.py), for the agent tests.

root, tools = node_root(tmp_path)     a Debian-like root: passwd, group, hostname, hosts, os-release, ssh units
spec_document(...)                   a resolved spec as `spec serve` answers it
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

STANDIN = Path(__file__).resolve().parent / "agent_standins" / "standin.py"
ROOT_PACKAGE = Path(__file__).resolve().parents[1]
NAMES = (
    "dpkg-query",
    "apt-get",
    "systemctl",
    "useradd",
    "usermod",
    "hostname",
    "ssh-keygen",
    "ip",
    "netplan",
    "ifup",
    "ifdown",
)
# spec_document()'s network, and the NIC the stand-in `ip` lists by default (tests/agent_standins/standin.py).
ADDRESS, GATEWAY, NIC, MAC = "10.11.1.53/24", "10.11.1.1", "ens18", "bc:24:11:5e:00:01"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGx0ZXN0a2V5Zm9ydGVycmF2aXhlbnNhZ2VudHRlc3Rz alice@laptop"


def tools_folder(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in NAMES:
        wrapper = folder / name
        wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{STANDIN}" {name} "$@"\n')
        wrapper.chmod(0o755)
    return folder


def in_line_network(root: Path) -> None:
    """spec_document()'s network already on the node, as the agent writes it: a VM's netplan file (and cloud-init's
    network off), a container's interfaces, both applied — so tests of the other sections need no spec server."""
    from terravixens.agent import network
    from terravixens.agent.desired import Interface, Network

    want = Network((Interface(ADDRESS, GATEWAY),), (), (), ())
    files = {
        network.NETPLAN_FILE: (network.netplan(want, [network.Link(NIC, MAC)]), 0o600),
        network.CLOUD_INIT_OFF: (network.CLOUD_INIT_OFF_TEXT, 0o644),
        network.INTERFACES: (
            network.MANAGED + "auto lo\niface lo inet loopback\n\n" + network.stanzas(want, ("eth0",)),
            0o644,
        ),
        network.PVE_IGNORE_INTERFACES: ("", 0o644),
    }
    for path, (text, mode) in files.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        target.chmod(mode)
    applied = {"addresses": [ADDRESS], "routes": [{"to": "default", "via": GATEWAY}], "nameservers": {}}
    (root / "var/lib/standin/network.json").write_text(json.dumps({"applied": {NIC: applied, "eth0": applied}}))


def node_root(base: Path, network: bool = True) -> tuple[Path, Path]:
    """A Debian-like root; with `network`, spec_document()'s network is already applied (in_line_network), else the
    node is as a stock image leaves it (nothing of the agent's; netplan's folder with cloud-init's file)."""
    root = base / "root"
    for folder in ("etc/ssh/sshd_config.d", "etc/sudoers.d", "etc/systemd/system", "usr/lib/systemd/system", "home"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    (root / "etc/passwd").write_text(
        "root:x:0:0:root:/root:/bin/bash\nsshd:x:100:65534::/run/sshd:/usr/sbin/nologin\n"
        "debian:x:1000:1000::/home/debian:/bin/bash\n"
    )
    (root / "etc/group").write_text("root:x:0:\nadm:x:4:debian\nsudo:x:27:\ndebian:x:1000:\n")
    (root / "etc/hostname").write_text("debian\n")
    (root / "etc/hosts").write_text("127.0.0.1\tlocalhost\n127.0.1.1\tdebian\n")
    (root / "etc/os-release").write_text('PRETTY_NAME="Debian GNU/Linux 13 (trixie)"\nVERSION_CODENAME=trixie\n')
    for unit in ("ssh.service", "systemd-resolved.service"):
        (root / "usr/lib/systemd/system" / unit).write_text("[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=x\n")
    (root / "var/lib/standin").mkdir(parents=True)
    (root / "var/lib/standin/units.json").write_text(
        json.dumps({"systemd-resolved.service": {"enabled": True, "active": True}})
    )
    for kind in ("rsa", "ed25519"):
        (root / f"etc/ssh/ssh_host_{kind}_key").write_text("from-the-template")
    if network:
        in_line_network(root)
    return root, tools_folder(base / "tools")


def spec_document(
    identity: str = "dns1",
    node_type: str = "ct",
    users: dict | None = None,
    packages: list[str] | None = None,
    enable: list[str] | None = None,
    disable: list[str] | None = None,
    run: dict | None = None,
    posture: str = "prod",
    config: dict | None = None,
    automatic_updates: bool = False,
) -> dict:
    defaults = {"ct": {"regenerate_host_keys": True}, "vm": {"guest_agent": True}, "pve": {"repository": "none"}}
    return {
        "schema_version": 1,
        "identity": {
            "name": identity,
            "hostname": identity,
            "domain": "lab.internal",
            "fqdn": f"{identity}.lab.internal",
        },
        "node": {"type": node_type, "parent": "pve1", "tier": 0},
        "spec": "dns",
        "network": {"ip": "10.11.1.53/24", "gateway": "10.11.1.1", "dns": [], "search": []},
        "access": {
            "posture": posture,
            "auth": "node_token",
            "ssh": {"password_authentication": False, "permit_root_login": False},
            "automatic_updates": automatic_updates,
            "users": users
            if users is not None
            else {"ops": {"sudo": True, "shell": "/bin/bash", "groups": ["adm"], "ssh_authorized_keys": [KEY]}},
        },
        "platform": {
            "packages": ["unbound"] if packages is None else packages,
            "services": {"enable": ["unbound"] if enable is None else enable, "disable": disable or []},
        },
        "config": {node_type: config if config is not None else defaults[node_type]},
        "run": run or {"trigger": "interval", "interval": "30m"},
    }


def agent(
    root: Path, tools: Path, *args: str, stdin: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess:
    """`python3 -m terravixens.agent ARGS --root ROOT --tools TOOLS`, as a guest runs it (a fresh interpreter)."""
    return subprocess.run(
        [sys.executable, "-m", "terravixens.agent", *args, "--root", str(root), "--tools", str(tools)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT_PACKAGE,
    )


def calls(root: Path) -> list[list[str]]:
    log = root / "var/lib/standin/calls.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


MUTATING = {"apt-get", "useradd", "usermod", "hostname", "ssh-keygen", "netplan", "ifup", "ifdown"}


def mutations(root: Path, since: int = 0) -> list[list[str]]:
    """Calls that change the node (reads — dpkg-query, systemctl is-enabled/is-active — excluded), from the
    `since`-th call on."""
    return [
        call
        for call in calls(root)[since:]
        if call[0] in MUTATING or (call[0] == "systemctl" and call[1] not in ("is-enabled", "is-active"))
    ]
