"""The node agent (issue 19, ADR 0045) on a throwaway root with stand-ins for its managers — never this machine.

Each section is shown to change the node on a first run and to change nothing on the second (no mutating call
reaches a manager: tests/agent_support.mutations); dry-run changes nothing; a failing step is a value; a bad spec
or root is refused before anything is done; the agent and its bundle need nothing but the standard library.
What a real node adds: apt's dependency resolution and prompts, systemd starting (or failing to start) units, PAM
and shadow files; the stand-ins answer in the real tools' formats and exit codes (tests/agent_standins/standin.py).
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from terravixens.agent import bundle, desired, units
from terravixens.agent.cli import main
from terravixens.agent.converge import converge
from terravixens.agent.sections import SECTIONS
from terravixens.agent.system import Node
from tests.agent_support import KEY, agent, calls, mutations, node_root, spec_document

ROOT = Path(__file__).resolve().parent.parent


def _converge(root: Path, tools: Path, document: dict, dry_run: bool = False) -> dict:
    return converge(Node(root, tools), desired.read(document), dry_run=dry_run).document()


def _changes(result: dict) -> dict[str, list[str]]:
    return {section["name"]: section["changes"] for section in result["sections"]}


def _tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): p.read_text()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "var/lib/standin/calls.log" not in str(p)
    }


# One document per section, each exercising it from the fixture's Debian-like root.
CASES: dict[str, dict[str, Any]] = {
    "hostname": {},
    "users": {
        "users": {"ops": {"sudo": False, "shell": "/bin/sh", "groups": ["adm", "sudo"], "ssh_authorized_keys": []}}
    },
    "sudo": {},
    "ssh": {},
    "packages": {"packages": ["unbound", "tmux"], "enable": []},
    "services": {"enable": ["unbound"], "disable": ["systemd-resolved"]},
    "config": {"node_type": "ct"},
    "run": {"run": {"trigger": "interval", "interval": "1h"}},
}


@pytest.mark.parametrize("section", sorted(CASES))
def test_each_section_changes_the_node_once_then_nothing(tmp_path, section):
    root, tools = node_root(tmp_path)
    document = spec_document(**CASES[section])
    first = _converge(root, tools, document)
    assert first["ok"], first
    assert _changes(first)[section], f"{section}: the first run changed nothing in it"
    done = len(calls(root))
    second = _converge(root, tools, document)
    assert second["ok"] and second["changed"] == 0, _changes(second)
    assert all(not changes for changes in _changes(second).values())
    assert mutations(root, since=done) == []  # only reads reached the managers


def test_the_first_run_leaves_the_node_as_the_spec_says(tmp_path):
    root, tools = node_root(tmp_path)
    result = _converge(root, tools, spec_document(disable=["systemd-resolved"]))
    assert result["ok"], result
    assert (root / "etc/hostname").read_text() == "dns1\n" and (root / "run/hostname").read_text() == "dns1\n"
    assert "127.0.1.1\tdns1.lab.internal dns1" in (root / "etc/hosts").read_text()
    assert "ops:x:1001:1001::/home/ops:/bin/bash" in (root / "etc/passwd").read_text()
    assert "adm:x:4:debian,ops" in (root / "etc/group").read_text()
    sudoers = root / "etc/sudoers.d/terravixens-ops"
    assert sudoers.read_text().endswith("ops ALL=(ALL:ALL) NOPASSWD:ALL\n") and sudoers.stat().st_mode & 0o777 == 0o440
    keys = root / "home/ops/.ssh/authorized_keys"
    assert keys.read_text().splitlines()[1:] == [KEY] and keys.stat().st_mode & 0o777 == 0o600
    assert (root / "home/ops/.ssh").stat().st_mode & 0o777 == 0o700
    assert (
        "PasswordAuthentication no\nPermitRootLogin no\n"
        in (root / "etc/ssh/sshd_config.d/50-terravixens.conf").read_text()
    )
    assert json.loads((root / "var/lib/standin/packages.json").read_text()) == ["unbound"]
    assert json.loads((root / "var/lib/standin/units.json").read_text()) == {
        "systemd-resolved.service": {"enabled": False, "active": False},
        "terravixens-agent.timer": {"enabled": True, "active": True},
        "unbound.service": {"enabled": True, "active": True},
    }
    assert (root / "etc/ssh/ssh_host_rsa_key").read_text() != "from-the-template"
    timer = (root / "etc/systemd/system/terravixens-agent.timer").read_text()
    assert "OnUnitInactiveSec=30m\n" in timer and "RandomizedDelaySec=180s\n" in timer


def test_a_spec_edit_is_applied_and_revokes_what_it_no_longer_gives(tmp_path):
    root, tools = node_root(tmp_path)
    _converge(root, tools, spec_document())
    edited = spec_document(users={}, run={"trigger": "manual", "interval": None})
    result = _converge(root, tools, edited)
    assert result["ok"], result
    assert _changes(result)["sudo"] == ["remove /etc/sudoers.d/terravixens-ops (sudo revoked)"]
    assert _changes(result)["ssh"] == ["remove authorized_keys of ops (left the spec)"]
    assert _changes(result)["run"] == [
        "rewrite /etc/systemd/system/terravixens-agent.service",
        "disable --now terravixens-agent.timer",
        "remove /etc/systemd/system/terravixens-agent.timer",
    ]
    assert "ops:" in (root / "etc/passwd").read_text()  # a user's home holds data: the account stays
    assert not (root / "home/ops/.ssh/authorized_keys").exists()
    assert _converge(root, tools, edited)["changed"] == 0


def test_a_nested_pve_host_gets_its_repository_and_a_vm_its_guest_agent(tmp_path):
    root, tools = node_root(tmp_path)
    pve = spec_document(node_type="pve", config={"repository": "no-subscription"}, packages=[], enable=[])
    assert _changes(_converge(root, tools, pve))["config"] == ["create /etc/apt/sources.list.d/terravixens-pve.sources"]
    sources = (root / "etc/apt/sources.list.d/terravixens-pve.sources").read_text()
    assert "Suites: trixie\nComponents: pve-no-subscription\n" in sources
    assert _converge(root, tools, pve)["changed"] == 0
    none = spec_document(node_type="pve", config={"repository": "none"}, packages=[], enable=[])
    assert _changes(_converge(root, tools, none))["config"] == [
        "remove /etc/apt/sources.list.d/terravixens-pve.sources"
    ]
    vm = spec_document(node_type="vm", packages=[], enable=[], automatic_updates=True)
    changes = _changes(_converge(root, tools, vm))
    assert changes["packages"] == ["install qemu-guest-agent unattended-upgrades"]
    assert [c.split(" (")[0] for c in changes["services"]] == [
        "enable --now qemu-guest-agent",
        "enable --now unattended-upgrades",
    ]


def test_dry_run_lists_every_change_and_changes_nothing(tmp_path):
    root, tools = node_root(tmp_path)
    before = _tree(root)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(spec_document()))
    ran = agent(root, tools, "converge", "--spec", str(spec), "--dry-run")
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.splitlines()
    assert lines[0] == "hostname: hostname debian -> dns1" and "users: add user ops" in lines
    assert "packages: install unbound" in lines and "run: enable --now terravixens-agent.timer" in lines
    assert lines[-1].startswith("dns1: would change 12 item(s)")
    assert _tree(root) == before and mutations(root) == []


def test_a_failing_step_is_a_value_and_the_other_sections_are_applied(tmp_path):
    root, tools = node_root(tmp_path)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(spec_document(packages=["unbound", "missing-tool"], enable=["unbound"])))
    ran = agent(root, tools, "converge", "--spec", "-", "--json", stdin=spec.read_text())
    assert ran.returncode == 8, ran.stderr
    result = json.loads(ran.stdout)
    failed = {s["name"]: s["failed"] for s in result["sections"] if s["failed"]}
    assert list(failed) == ["packages", "services"]
    assert "E: Unable to locate package missing-tool" in failed["packages"]
    assert "Unit file unbound.service does not exist" in failed["services"]
    assert result["ok"] is False and (root / "etc/hostname").read_text() == "dns1\n"
    assert _changes(result)["run"]  # the sections after the failed ones still ran


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"schema_version": 2}, "spec field schema_version: 2 is not 1"),
        ({"identity": {"name": "dns1", "hostname": "Bad Host", "fqdn": "x"}}, "'Bad Host' is not a DNS label"),
        ({"platform": {"packages": ["unbound; rm -rf /"]}}, "spec field platform.packages: 'unbound; rm -rf /'"),
        ({"run": {"trigger": "interval", "interval": "soon"}}, "spec field run.interval: 'soon' is not a duration"),
    ],
)
def test_a_bad_spec_is_refused_in_one_line_before_anything_changes(tmp_path, capsys, change, message):
    root, tools = node_root(tmp_path)
    before = _tree(root)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({**spec_document(), **change}))
    assert main(["converge", "--spec", str(spec), "--root", str(root), "--tools", str(tools)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
    assert _tree(root) == before and calls(root) == []


def test_a_root_other_than_slash_without_stand_ins_is_refused(tmp_path, capsys):
    root, _ = node_root(tmp_path)
    assert main(["converge", "--spec", "-", "--root", str(root)]) == 2
    assert "no --tools folder is given: the system's managers act on /" in capsys.readouterr().err


def test_the_run_units_follow_the_trigger():
    assert "[Install]" not in units.service("interval", "30m") and "[Install]" in units.service("boot", None)
    assert "ExecStart=/usr/bin/python3 -m terravixens.agent run --json --record" in units.service("manual", None)
    assert "OnUnitInactiveSec=24h\nRandomizedDelaySec=300s\n" in units.timer("24h")
    assert "RandomizedDelaySec=6s\n" in units.timer("1m")


NOT_ON_A_GUEST = ("pydantic", "pydantic_core", "cdktf", "jsii", "constructs", "yaml", "starlette", "uvicorn")


def test_the_agent_imports_only_the_standard_library(tmp_path):
    program = (
        "import json, sys\nbefore = set(sys.modules)\nimport terravixens.agent.cli\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    ran = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    tops = {name.split(".")[0] for name in json.loads(ran.stdout)}
    assert "terravixens" in tops
    assert sorted(tops - set(sys.stdlib_module_names) - {"terravixens"}) == []


def test_the_bundle_runs_on_a_bare_python_and_holds_only_the_agents_modules(tmp_path):
    """`python3 -I -S`: no site-packages at all, as on a guest without pip packages: any import outside the
    standard library and the bundle fails."""
    data = bundle.build()
    assert data == bundle.build()  # reproducible: the same files, the same bytes
    names = zipfile.ZipFile(io.BytesIO(data)).namelist()
    assert "terravixens/agent/__main__.py" in names and "terravixens/specclient/get.py" in names
    # The spec's vocabulary, shared with the server (ADR 0052), and the account rule travel with the agent.
    assert "terravixens/standalone/vocabulary.py" in names and "terravixens/agent/accounts.py" in names
    assert not [n for n in names if n.startswith(("terravixens/config", "terravixens/operations", "terravixens/cli"))]
    pyz = tmp_path / "agent.pyz"
    pyz.write_bytes(data)
    root, tools = node_root(tmp_path)
    ran = subprocess.run(
        [
            sys.executable,
            "-I",
            "-S",
            str(pyz),
            "converge",
            "--spec",
            "-",
            "--json",
            "--root",
            str(root),
            "--tools",
            str(tools),
        ],
        input=json.dumps(spec_document()),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["changed"] == 12


def test_every_section_is_tested():
    # network: tests/test_agent_network.py (its changes are checked against a spec server on loopback)
    assert sorted(section.name for section in SECTIONS) == sorted([*CASES, "network"])
