"""What the agent refuses in a resolved spec, and on the node, before it changes anything (issue 26; ADR 0052).

Each test reproduces a finding of the red team on main b4ffe4b and fails there:
- medium "system accounts are accepted as spec users": `root` in a resolved spec replaced root's authorized_keys,
  `sshd` with sudo got passwordless sudo and a key; an account the node made as a system account was managed;
- low "patterns use ^…$ with match": a user `"ops\\n"` wrote a sudoers file sudo cannot parse, and `run.interval:
  "30m\\n"` crashed with a traceback after the other sections were applied;
- low "a deeply nested resolved spec under the 1 MiB cap ends in a RecursionError traceback";
- low "duplicate keys in a resolved spec are last-wins".
Throwaway --root and stand-in managers only (tests/agent_support.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from terravixens.agent.cli import main
from tests.agent_support import KEY, agent, calls, node_root, spec_document


def _tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def _converge(tmp_path: Path, root: Path, tools: Path, text: str, *extra: str) -> int:
    spec = tmp_path / "spec.json"
    spec.write_text(text)
    return main(["converge", "--spec", str(spec), "--json", *extra, "--root", str(root), "--tools", str(tools)])


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err.strip()


def _user(name: str, sudo: bool = True) -> dict:
    return {name: {"sudo": sudo, "shell": "/bin/bash", "groups": [], "ssh_authorized_keys": [KEY]}}


# ------------------------------------------------------------------------------------------ names refused by the spec
@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("root", "'root' is a system account: a spec manages regular login accounts only"),
        ("sshd", "'sshd' is a system account"),
        ("www-data", "'www-data' is a system account"),
        ("systemd-network", "'systemd-network' is a system account"),
        ("_apt", "'_apt' is a system account"),
        ("nobody", "'nobody' is a system account"),
        ("ops\n", "'ops\\n' is not a valid user name"),
    ],
)
def test_a_system_account_or_a_bad_name_as_a_spec_user_is_refused_before_anything_changes(
    tmp_path, capsys, name, message
):
    root, tools = node_root(tmp_path)
    (root / "root/.ssh").mkdir(parents=True)
    (root / "root/.ssh/authorized_keys").write_text("ssh-ed25519 AAAAoperator operator@desk\n")
    before = _tree(root)
    assert _converge(tmp_path, root, tools, json.dumps(spec_document(users=_user(name)))) == 2
    line = _one_line(capsys)
    assert (
        line.startswith("agent: spec field access.users: ") and message in line and line.endswith("(nothing changed)")
    )
    assert _tree(root) == before and calls(root) == []  # root's keys kept, no sudoers file for sshd


def test_an_existing_system_account_on_the_node_is_not_managed(tmp_path, capsys):
    """`deploy` exists on this node with uid 999 (a package's system account): no shell, sudo or keys for it; the
    other sections, and the other users, are applied."""
    root, tools = node_root(tmp_path)
    with (root / "etc/passwd").open("a") as passwd:
        passwd.write("deploy:x:999:999::/home/deploy:/usr/sbin/nologin\n")
    (root / "home/deploy").mkdir()
    users = {**_user("deploy"), **_user("ops")}
    assert _converge(tmp_path, root, tools, json.dumps(spec_document(users=users))) == 8
    result = json.loads(capsys.readouterr().out)
    failed = {s["name"]: s["failed"] for s in result["sections"] if s["failed"]}
    why = (
        "user deploy exists on this node as a system account (uid 999; regular accounts have uids 1000-60000 outside "
        "101-999, /etc/login.defs): a spec manages regular login accounts only; give the spec's user another name"
    )
    assert failed == {
        "users": f"user deploy: {why}",
        "sudo": f"sudo for deploy: {why}",
        "ssh": f"authorized_keys of deploy: {why}",
    }
    assert not (root / "etc/sudoers.d/terravixens-deploy").exists() and not (root / "home/deploy/.ssh").exists()
    assert "deploy:x:999:999::/home/deploy:/usr/sbin/nologin" in (root / "etc/passwd").read_text()
    assert (root / "etc/sudoers.d/terravixens-ops").exists() and (root / "home/ops/.ssh/authorized_keys").exists()
    assert (root / "etc/hostname").read_text() == "dns1\n"


def test_the_login_range_comes_from_the_nodes_login_defs(tmp_path, capsys):
    """UID_MIN 2000 in login.defs: uid 1500 is not a regular account there (it is on a default Debian)."""
    root, tools = node_root(tmp_path)
    (root / "etc/login.defs").write_text("# shadow\nUID_MIN\t\t 2000\nUID_MAX\t\t0xea60\n#SYS_UID_MIN 100\n")
    with (root / "etc/passwd").open("a") as passwd:
        passwd.write("ops:x:1500:1500::/home/ops:/bin/bash\n")
    assert _converge(tmp_path, root, tools, json.dumps(spec_document(), indent=1), "--dry-run") == 8
    result = json.loads(capsys.readouterr().out)
    assert "uid 1500; regular accounts have uids 2000-60000 outside 101-1999" in result["sections"][1]["failed"]
    (root / "etc/login.defs").unlink()
    assert _converge(tmp_path, root, tools, json.dumps(spec_document()), "--dry-run") == 0


# ------------------------------------------------------------------------------------------ trailing newlines
def test_a_run_interval_with_a_newline_is_refused_before_anything_changes(tmp_path, capsys):
    """On b4ffe4b `"30m\\n"` passes `^…$` and crashes units.timer with a traceback after hostname, users, sudo,
    ssh, packages and services were applied."""
    root, tools = node_root(tmp_path)
    before = _tree(root)
    document = spec_document(run={"trigger": "interval", "interval": "30m\n"})
    assert _converge(tmp_path, root, tools, json.dumps(document)) == 2
    assert _one_line(capsys) == (
        "agent: spec field run.interval: '30m\\n' is not a duration: write a number and s, m or h, e.g. '30m': fix "
        "the spec (nothing changed)"
    )
    assert _tree(root) == before and calls(root) == []


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"packages": ["unbound\n"]}, "platform.packages"),
        ({"enable": ["unbound\n"]}, "platform.services.enable"),
        ({"disable": ["systemd-resolved.service\n"]}, "platform.services.disable"),
        ({"users": {"ops": {"shell": "/bin/bash\n"}}}, "access.users.ops.shell"),
        ({"users": {"ops": {"groups": ["adm\n"]}}}, "access.users.ops.groups"),
        ({"users": {"ops": {"ssh_authorized_keys": [KEY + "\n"]}}}, "access.users.ops.ssh_authorized_keys"),
        ({"identity": "dns1\n"}, "identity"),
    ],
)
def test_a_trailing_newline_in_any_name_is_refused_in_one_line(tmp_path, capsys, change, field):
    root, tools = node_root(tmp_path)
    identity = change.pop("identity", "dns1")
    document = spec_document(identity=identity, **change)
    assert _converge(tmp_path, root, tools, json.dumps(document)) == 2
    line = _one_line(capsys)
    assert line.startswith(f"agent: spec field {field}: ") and line.endswith("(nothing changed)")
    assert "\\n'" in line or field.endswith("keys")  # a key is shown cut at 64 characters
    assert calls(root) == []


# ------------------------------------------------------------------------------------------ the reader
def test_a_deeply_nested_spec_under_the_size_cap_is_one_input_error(tmp_path, capsys):
    """On b4ffe4b: 100,000 nested lists (200 kB, far under the 1 MiB cap) end in a RecursionError traceback."""
    root, tools = node_root(tmp_path)
    nested = '{"schema_version": 1, "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    assert _converge(tmp_path, root, tools, nested) == 2
    line = _one_line(capsys)
    assert line.startswith("agent: the spec ") and "is nested more than 32 levels deep" in line
    assert calls(root) == []


def test_duplicate_keys_in_a_resolved_spec_are_refused_not_last_wins(tmp_path, capsys):
    """On b4ffe4b the second `users` wins silently: a spec edited (or forged) to carry two answers is applied."""
    root, tools = node_root(tmp_path)
    text = json.dumps(spec_document(), indent=1)
    doubled = text.replace('"automatic_updates": false,', '"automatic_updates": false,\n  "users": {},', 1)
    assert doubled != text
    assert _converge(tmp_path, root, tools, doubled) == 2
    line = _one_line(capsys)
    assert "key 'users' appears twice in one object" in line and "(nothing changed)" in line
    assert calls(root) == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1, 2]", "the spec is not a JSON object"),
        ('{"schema_version": NaN}', "is out of range"),
        ("{not json", "is not valid JSON"),
    ],
)
def test_other_unreadable_specs_are_one_line(tmp_path, capsys, text, message):
    root, tools = node_root(tmp_path)
    assert _converge(tmp_path, root, tools, text) == 2
    assert message in _one_line(capsys)


def test_a_spec_that_is_a_fifo_is_refused_not_waited_for(tmp_path):
    """On b4ffe4b the agent waits for a writer for ever (a fresh interpreter here, bounded by the test)."""
    root, tools = node_root(tmp_path)
    os.mkfifo(tmp_path / "fifo.json")
    ran = agent(root, tools, "converge", "--spec", str(tmp_path / "fifo.json"), timeout=30)
    assert ran.returncode == 2 and ran.stderr.count("\n") == 1
    assert "is a FIFO, not a regular file" in ran.stderr
