"""What holds secrets is never committed by accident: git ignores it in a checkout of this repository (the files
terravixens writes next to the site: state and its backups, etcd snapshots, a talosconfig or kubeconfig saved there,
secrets files)."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SECRET_HOLDERS = [
    "etcd-snapshots/homelab/prod/prod_20261126T112650.317560Z_cp-a_manual.snapshot",
    "etcd-snapshots/homelab/prod/manifest.json",
    "talosconfig",
    "kubeconfig",
    "credentials/homelab/prod/talosconfig",
    "credentials/homelab/prod/.kubeconfig.4242.part",
    "state/platform-prod.tfstate",
    "state/platform-prod.tfstate.backup",
    "state-backups/homelab/platform-prod/20261126T112650Z.tfstate",
    "homelab-secrets.yaml",
]


def ignored(paths: list[str]) -> set[str]:
    ran = subprocess.run(
        ["git", "-C", str(ROOT), "check-ignore", "--no-index", "--stdin"],
        input="\n".join(paths) + "\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert ran.returncode in (0, 1), ran.stderr  # 1: none ignored
    return set(ran.stdout.split())


def test_files_that_hold_secrets_are_ignored():
    assert ignored(SECRET_HOLDERS) == set(SECRET_HOLDERS)


def test_the_check_can_fail():
    assert ignored(["sites/example.yaml", "terravixens/cli.py"]) == set()
