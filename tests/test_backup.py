"""State backups: timestamped, 0600 in 0700 folders, verified against what was pulled, and restore only pushes a
backup of the same state lineage (the current state is backed up first)."""

from __future__ import annotations

import json
import os
import stat

import pytest

from terravixens.exitcodes import ExitCode
from terravixens.operations import OperationError
from terravixens.operations.backup import backup_state, read_backup, restore_state
from terravixens.operations.files import private_process, write_private
from tests.fake_terraform import FakeTerraform, platform_state


def fake() -> FakeTerraform:
    return FakeTerraform({"platform-prod": platform_state(["cp-a"], ["wk-a"], "cp-a"), "gitops-prod": {}})


def test_backup_is_private_timestamped_and_verified(tmp_path):
    tf = fake()
    workdir = tmp_path / "cdktf.out" / "stacks" / "platform-prod"
    backup = backup_state(tf, workdir, "platform-prod", "homelab", tmp_path, "deploy")
    assert backup.path.parent == tmp_path / "state-backups" / "homelab" / "platform-prod"
    assert backup.path.name.endswith("-serial1-deploy.tfstate")
    assert stat.S_IMODE(backup.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(backup.path.parent.stat().st_mode) == 0o700
    assert backup.info.lineage == "lineage-platform-prod" and backup.info.instances == len(tf.states["platform-prod"])
    assert ("platform-prod", "show", "-json", "-no-color", str(backup.path)) in tf.calls  # Terraform read it back
    again = backup_state(tf, workdir, "platform-prod", "homelab", tmp_path, "deploy")
    assert again.path != backup.path and backup.path.exists()  # never overwritten, even within the same second


def test_no_state_no_backup(tmp_path):
    assert backup_state(fake(), tmp_path / "gitops-prod", "gitops-prod", "homelab", tmp_path, "deploy") is None


def test_a_backup_terraform_cannot_read_stops_everything(tmp_path):
    tf = fake()
    original = tf.run

    def broken_show(workdir, *args):
        if args[0] == "show":
            return type(original(workdir, "init"))(1, "", "Error: Failed to load state: unsupported state format")
        return original(workdir, *args)

    tf.run = broken_show
    with pytest.raises(OperationError) as caught:
        backup_state(tf, tmp_path / "platform-prod", "platform-prod", "homelab", tmp_path, "deploy")
    assert caught.value.code == ExitCode.BACKUP_FAILED
    assert "Terraform cannot read the backup back" in str(caught.value)


def test_restore_refuses_another_lineage_and_backs_up_first(tmp_path):
    tf = fake()
    other = write_private(
        tmp_path / "other.tfstate", json.dumps({"version": 4, "lineage": "someone-else", "serial": 9, "resources": []})
    )
    with pytest.raises(OperationError) as caught:
        restore_state(tf, tmp_path / "platform-prod", "platform-prod", "homelab", tmp_path, other)
    assert caught.value.code == ExitCode.BAD_INPUT and "belongs to another state" in str(caught.value)
    assert list((tmp_path / "state-backups").rglob("*-before-restore.tfstate"))  # the current one was kept anyway


def test_restore_rejects_what_is_not_a_state(tmp_path):
    bogus = write_private(tmp_path / "plan.json", json.dumps({"format_version": "1.2", "planned_values": {}}))
    with pytest.raises(OperationError, match="not a Terraform state"):
        read_backup(bogus)


def test_private_process_umask(tmp_path):
    previous = private_process()
    try:
        path = tmp_path / "written-by-terraform"
        path.write_text("state")
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    finally:
        os.umask(previous)
