"""The agent follows no link it did not make (issue 26, the high finding and `--record`; ADR 0052).

Each test reproduces a finding of the red team on main b4ffe4b and fails there: `~/.ssh -> /etc` made the folder
0700, owned by the user, with an authorized_keys in it (root escalation; here the link points at the throwaway
root's own etc, `../../etc`, never at this machine's); `authorized_keys` as a link or a FIFO was read through
(a FIFO hung the agent, which the timer runs as root); a home that is a link let the writes escape the root;
`--record` wrote outside the root, and in a dry run. All on a throwaway --root with the stand-in managers
(tests/agent_support.py); this machine's users and /etc are never touched.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from terravixens.agent import desired
from terravixens.agent.cli import main
from terravixens.agent.converge import converge
from terravixens.agent.sections import Ssh
from terravixens.agent.system import Node, Refused
from tests.agent_support import agent, mutations, node_root, spec_document

OPS = "ops:x:1001:1001::/home/ops:/bin/bash\n"


def _with_ops(tmp_path: Path) -> tuple[Path, Path]:
    """The fixture's root with `ops` already a regular account (uid 1001) and its home."""
    root, tools = node_root(tmp_path)
    with (root / "etc/passwd").open("a") as passwd:
        passwd.write(OPS)
    with (root / "etc/group").open("a") as group:
        group.write("ops:x:1001:\n")
    (root / "home/ops").mkdir()
    return root, tools


def _run(root: Path, tools: Path, tmp_path: Path, *extra: str, timeout: float = 60) -> tuple[int, dict, str]:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(spec_document()))
    ran = agent(root, tools, "converge", "--spec", str(spec), "--json", *extra, timeout=timeout)
    return ran.returncode, json.loads(ran.stdout) if ran.stdout.strip() else {}, ran.stderr


def _failed(result: dict) -> dict[str, str]:
    return {section["name"]: section["failed"] for section in result["sections"] if section["failed"]}


def _snapshot(folder: Path) -> dict[str, tuple[int, int, int, str]]:
    """Every entry under `folder` (links not followed): mode, owner, group and content (or link target)."""
    seen = {}
    for path in sorted(folder.rglob("*")):
        info = path.lstat()
        body = os.readlink(path) if path.is_symlink() else (path.read_text() if path.is_file() else "")
        seen[str(path.relative_to(folder))] = (info.st_mode, info.st_uid, info.st_gid, body)
    return seen


def test_a_users_ssh_folder_linked_to_etc_is_refused_and_etc_is_untouched(tmp_path):
    """The high finding: `~/.ssh -> /etc`. On b4ffe4b the agent chmods the root's etc 0700, chowns it to ops and
    writes authorized_keys into it."""
    root, tools = _with_ops(tmp_path)
    (root / "home/ops/.ssh").symlink_to("../../etc")
    etc = (root / "etc").lstat()
    code, result, stderr = _run(root, tools, tmp_path)
    assert code == 8, stderr
    assert _failed(result) == {
        "ssh": "authorized_keys of ops: /home/ops/.ssh is a symbolic link, not a folder: the agent follows no link "
        "it did not make; replace it with a real folder (or remove it)"
    }
    after = (root / "etc").lstat()
    assert (after.st_mode, after.st_uid, after.st_gid) == (etc.st_mode, etc.st_uid, etc.st_gid)
    assert not (root / "etc/authorized_keys").exists()
    assert (root / "home/ops/.ssh").is_symlink()
    # The section's policy and the other sections are applied.
    assert "PasswordAuthentication no" in (root / "etc/ssh/sshd_config.d/50-terravixens.conf").read_text()
    assert (root / "etc/hostname").read_text() == "dns1\n" and (root / "etc/sudoers.d/terravixens-ops").exists()


def test_authorized_keys_linked_to_a_shadow_like_file_is_refused_unread_and_unchanged(tmp_path):
    """`~/.ssh/authorized_keys -> /etc/shadow`: on b4ffe4b the agent reads the target and reports success."""
    root, tools = _with_ops(tmp_path)
    shadow = root / "etc/shadow"
    shadow.write_text("root:$6$secret-hash:19000:0:99999:7:::\n")
    shadow.chmod(0o640)
    (root / "home/ops/.ssh").mkdir(mode=0o700)
    (root / "home/ops/.ssh/authorized_keys").symlink_to("../../../etc/shadow")
    before = _snapshot(root / "etc")
    code, result, stderr = _run(root, tools, tmp_path)
    assert code == 8, stderr
    assert _failed(result)["ssh"] == (
        "authorized_keys of ops: /home/ops/.ssh/authorized_keys is a symbolic link, not a regular file: the agent "
        "follows no link it did not make; replace it with a real regular file (or remove it)"
    )
    assert shadow.read_text().startswith("root:$6$secret") and shadow.stat().st_mode & 0o777 == 0o640
    assert (root / "home/ops/.ssh/authorized_keys").is_symlink()
    changed = {k for k, v in _snapshot(root / "etc").items() if before.get(k) != v}
    assert "shadow" not in changed


def test_a_fifo_as_authorized_keys_does_not_hang_the_agent(tmp_path):
    """A user's own FIFO (or a link to /dev/zero) where the agent reads: on b4ffe4b the read blocks for ever
    (the unit's 45-minute timeout, every 30 minutes); here it is refused at once."""
    root, tools = _with_ops(tmp_path)
    (root / "home/ops/.ssh").mkdir(mode=0o700)
    os.mkfifo(root / "home/ops/.ssh/authorized_keys")
    code, result, stderr = _run(root, tools, tmp_path, timeout=30)
    assert code == 8, stderr
    assert _failed(result)["ssh"].startswith("authorized_keys of ops: /home/ops/.ssh/authorized_keys is a FIFO")


def test_a_home_that_is_a_link_is_refused_and_nothing_escapes_the_root(tmp_path):
    """A link in an intermediate component of the home path: on b4ffe4b `.ssh` and authorized_keys are made in the
    folder it points to, outside the root."""
    root, tools = _with_ops(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "home/ops").rmdir()
    (root / "home/ops").symlink_to("../../outside")
    code, result, stderr = _run(root, tools, tmp_path)
    assert code == 8, stderr
    assert _failed(result)["ssh"].startswith(
        "authorized_keys of ops: /home/ops is a symbolic link, not a folder: the agent follows no link"
    )
    assert list(outside.iterdir()) == []


def test_a_link_on_a_system_path_fails_its_section_only(tmp_path):
    """`/etc/sudoers.d -> elsewhere`: the sudo section fails naming it, the others run."""
    root, tools = node_root(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "etc/sudoers.d").rmdir()
    (root / "etc/sudoers.d").symlink_to(outside)
    code, result, stderr = _run(root, tools, tmp_path)
    assert code == 8, stderr
    assert list(_failed(result)) == ["sudo"]
    assert "/etc/sudoers.d is a symbolic link, not a folder" in _failed(result)["sudo"]
    assert list(outside.iterdir()) == []
    assert (root / "home/ops/.ssh/authorized_keys").is_file()


def test_a_link_planted_after_the_plan_is_refused_by_the_step(tmp_path):
    """The plan and the step are apart in time: the step's own walk refuses what appeared in between."""
    root, tools = _with_ops(tmp_path)
    node = Node(root, tools)
    [policy, keys] = Ssh().plan(node, desired.read(spec_document()))
    assert policy.text.endswith("50-terravixens.conf") and keys.text == "authorized_keys of ops: 1 key(s)"
    (root / "home/ops/.ssh").symlink_to("../../etc")
    with pytest.raises(Refused, match=r"^/home/ops/\.ssh is a symbolic link, not a folder"):
        keys.step()
    assert not (root / "etc/authorized_keys").exists()


@pytest.mark.parametrize("record", ["../outside.json", "relative.json", "/var/lib/../../../outside.json"])
def test_a_record_outside_the_root_is_refused_before_anything_changes(tmp_path, capsys, record):
    """On b4ffe4b `--record` is joined to the root unchecked: `../..` writes outside it."""
    root, tools = node_root(tmp_path)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(spec_document()))
    code = main(["converge", "--spec", str(spec), "--record", record, "--root", str(root), "--tools", str(tools)])
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not an absolute node path without '.' or '..'" in err
    assert not (tmp_path / "outside.json").exists() and not (root / "relative.json").exists()
    assert mutations(root) == [] and (root / "etc/hostname").read_text() == "debian\n"


def test_a_record_through_a_link_is_not_written(tmp_path):
    root, tools = node_root(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "var/lib/terravixens").symlink_to(outside)
    code, result, stderr = _run(root, tools, tmp_path, "--record", "/var/lib/terravixens/last-run.json")
    assert code == 8, stderr  # the container's host-keys marker lives there too: that step is refused as well
    assert (
        list(_failed(result)) == ["config"] and "/var/lib/terravixens is a symbolic link" in _failed(result)["config"]
    )
    assert "the record /var/lib/terravixens/last-run.json is not written: /var/lib/terravixens is a symbolic" in stderr
    assert list(outside.iterdir()) == []


def test_a_dry_run_writes_nothing_not_even_the_record(tmp_path):
    """On b4ffe4b `--dry-run --record FILE` writes the record."""
    root, tools = node_root(tmp_path)
    before = _snapshot(root)
    code, result, stderr = _run(root, tools, tmp_path, "--dry-run", "--record", "/var/lib/terravixens/last-run.json")
    assert code == 0 and result["mode"] == "dry-run", stderr
    assert "--dry-run: the record /var/lib/terravixens/last-run.json is not written" in stderr
    after = {k: v for k, v in _snapshot(root).items() if not k.startswith("var/lib/standin")}
    assert after == {k: v for k, v in before.items() if not k.startswith("var/lib/standin")}


def test_run_dry_run_keeps_the_fetched_spec_in_memory(tmp_path, monkeypatch, capsys):
    """`run --dry-run` fetches but does not replace spec.json (on b4ffe4b spec get wrote it before the dry run)."""
    from terravixens.specclient import get

    root, tools = node_root(tmp_path)
    body = json.dumps(spec_document()).encode()
    monkeypatch.setattr(get, "fetch", lambda options: get.Fetched(get.OK, body, "dns1"))
    code = main(["run", "--dry-run", "--json", "--root", str(root), "--tools", str(tools)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["mode"] == "dry-run" and json.loads(out)["changed"] == 12
    assert "--dry-run: /var/lib/terravixens/spec.json is not written" in err
    assert not (root / "var/lib/terravixens").exists()
    code = main(["run", "--json", "--root", str(root), "--tools", str(tools)])
    assert code == 0 and json.loads((root / "var/lib/terravixens/spec.json").read_bytes()) == spec_document()
    assert (root / "var/lib/terravixens/spec.json").stat().st_mode & 0o777 == 0o600
    assert (root / "var/lib/terravixens").stat().st_mode & 0o777 == 0o700


def test_the_walk_refuses_dot_dot_and_relative_paths(tmp_path):
    root, tools = node_root(tmp_path)
    node = Node(root, tools)
    for path in ("etc/hostname", "/etc/../../x", "/etc/./hostname"):
        with pytest.raises(Refused, match="is not an absolute node path"):
            node.read(path)
    assert node.read("/etc/hostname") == "debian\n" and node.read("/etc/nothing") is None
    assert node.read("/nothing/at/all") is None and node.mode("/etc/nothing") is None


def test_writes_are_atomic_private_and_owned_on_the_opened_file(tmp_path):
    root, tools = _with_ops(tmp_path)
    result = converge(Node(root, tools), desired.read(spec_document()))
    assert result.ok, result.document()
    ssh = root / "home/ops/.ssh"
    assert ssh.stat().st_mode & 0o777 == 0o700 and (ssh / "authorized_keys").stat().st_mode & 0o777 == 0o600
    if os.geteuid() == 0:  # chown needs root: the tests' root is 0 in CI
        assert (ssh.stat().st_uid, (ssh / "authorized_keys").stat().st_uid) == (1001, 1001)
    assert [p.name for p in ssh.iterdir()] == ["authorized_keys"]  # no temporary file left


def test_a_hard_link_in_a_folder_others_can_write_is_not_read(tmp_path):
    """A second name for someone else's file (where fs.protected_hardlinks is off): not read where another user
    could have made it; read where only the agent's own user writes (/etc)."""
    root, tools = _with_ops(tmp_path)
    shadow = root / "etc/shadow"
    shadow.write_text("root:$6$secret-hash:19000:0:99999:7:::\n")
    ssh = root / "home/ops/.ssh"
    ssh.mkdir()
    ssh.chmod(0o757)
    os.link(shadow, ssh / "authorized_keys")
    node = Node(root, tools)
    with pytest.raises(Refused, match=r"^/home/ops/\.ssh/authorized_keys has 2 names \(hard links\) in a folder"):
        node.read("/home/ops/.ssh/authorized_keys")
    assert node.read("/etc/shadow") == shadow.read_text()  # /etc: written by the agent's user only


def test_a_large_file_is_refused_not_read_whole(tmp_path):
    root, tools = _with_ops(tmp_path)
    (root / "home/ops/.ssh").mkdir()
    with (root / "home/ops/.ssh/authorized_keys").open("wb") as sparse:
        sparse.truncate(64 * 1024 * 1024)
    with pytest.raises(Refused, match=r"is larger than 4,194,304 bytes"):
        Node(root, tools).read("/home/ops/.ssh/authorized_keys")


def test_os_release_as_debian_links_it_is_read_from_usr_lib(tmp_path):
    """Debian's /etc/os-release is a link to ../usr/lib/os-release: the nested pve host's repository still gets the
    node's suite (os-release(5)'s fallback), without the link being followed."""
    root, tools = node_root(tmp_path)
    (root / "usr/lib/os-release").write_text('PRETTY_NAME="Debian 12"\nVERSION_CODENAME=bookworm\n')
    (root / "etc/os-release").unlink()
    (root / "etc/os-release").symlink_to("../usr/lib/os-release")
    pve = spec_document(node_type="pve", config={"repository": "no-subscription"}, packages=[], enable=[])
    result = converge(Node(root, tools), desired.read(pve))
    assert result.ok, result.document()
    assert "Suites: bookworm\n" in (root / "etc/apt/sources.list.d/terravixens-pve.sources").read_text()


def test_another_users_linked_ssh_folder_is_left_alone_and_fails_nothing(tmp_path):
    """`debian` (not in the spec) keeps ~/.ssh in a dotfiles folder through a link: the agent has nothing of its own
    there to take back, reads nothing through it, and the ssh section succeeds."""
    root, tools = node_root(tmp_path)
    dotfiles = root / "home/debian/dotfiles/ssh"
    dotfiles.mkdir(parents=True)
    (dotfiles / "authorized_keys").write_text("# terravixens: managed by the agent from the spec; edits are replaced\n")
    (root / "home/debian/.ssh").symlink_to("dotfiles/ssh")
    code, result, stderr = _run(root, tools, tmp_path)
    assert code == 0 and not _failed(result), stderr
    assert (dotfiles / "authorized_keys").exists()
