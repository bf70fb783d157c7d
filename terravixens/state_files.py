"""Local state on disk holds every secret of a layer (the Proxmox API token, machine secrets): its folder is 0700 and
its files — the state, Terraform's own `<state>.backup`, the lock info — are 0600, whoever wrote them.

A umask of 077 makes Terraform create them so, but Terraform rewrites an existing state file in place and keeps its
mode: a state first written 0644 (by an older, unguarded `cdktf deploy`) stays 0644 for ever unless tightened. The
same holds for what `terraform init` records of the layer's backend (`.terraform/terraform.tfstate`: the backend's
configuration, an S3 endpoint and bucket, access keys when they were written there): 0600 in a 0700 `.terraform`.
Standard library only: `terravixens-terraform` runs this around every command that can write state.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

STACK_FILE = "cdk.tf.json"
BACKEND_DIR = ".terraform"  # terraform init's working folder in the layer's directory
BACKEND_STATE = "terraform.tfstate"  # what init recorded of the backend, in it


def local_state_path(stack_dir: Path) -> Path | None:
    """The local backend's state file of the stack synthesized in `stack_dir`; None for any other backend."""
    try:
        document = json.loads((stack_dir / STACK_FILE).read_text())
        path = document["terraform"]["backend"]["local"]["path"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return Path(os.path.normpath(stack_dir / path)) if isinstance(path, str) else None


def _tighten(path: Path, mode: int, changed: list[Path]) -> None:
    try:
        info = path.lstat()
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode):  # never follow a link out of the state folder
        return
    if stat.S_IMODE(info.st_mode) != mode:
        os.chmod(path, mode)
        changed.append(path)


def is_state_file(name: str) -> bool:
    """`<layer>.tfstate` and what Terraform writes beside it: `.backup`, `.lock.info`."""
    return name.endswith(".tfstate") or ".tfstate." in name


def tighten_local_state(stack_dir: Path, project_root: Path) -> list[Path]:
    """Makes the stack's local state folder 0700 and the state files in it (every layer's: they share the folder)
    0600; returns what changed.

    Only state files are touched (`*.tfstate`, `*.tfstate.*`), and the folder only when it is inside the project and
    not the project itself (a `local_dir: .` site keeps its checkout's mode).
    """
    state = local_state_path(stack_dir)
    changed: list[Path] = []
    if state is None:
        return changed
    folder, root = state.parent.resolve(), project_root.resolve()
    if folder != root and root in folder.parents:
        _tighten(folder, 0o700, changed)
    if folder.is_dir():
        for candidate in sorted(folder.iterdir()):
            if is_state_file(candidate.name):
                _tighten(candidate, 0o600, changed)
    return changed


def tighten_backend_state(stack_dir: Path) -> list[Path]:
    """The layer's `.terraform` folder 0700 and the backend record `terraform init` writes in it 0600; returns what
    changed. A `.terraform` that is a symbolic link is left alone (never followed out of the layer)."""
    changed: list[Path] = []
    folder = Path(stack_dir) / BACKEND_DIR
    try:
        info = folder.lstat()
    except FileNotFoundError:
        return changed
    if not stat.S_ISDIR(info.st_mode):
        return changed
    _tighten(folder, 0o700, changed)
    _tighten(folder / BACKEND_STATE, 0o600, changed)
    return changed


def tighten_tree(folder: Path) -> list[Path]:
    """`folder` and every folder under it 0700, every file 0600 (state backups); links are left alone."""
    changed: list[Path] = []
    if not folder.is_dir() or folder.is_symlink():
        return changed
    _tighten(folder, 0o700, changed)
    for parent, folders, files in os.walk(folder):
        for name in folders:
            _tighten(Path(parent) / name, 0o700, changed)
        for name in files:
            _tighten(Path(parent) / name, 0o600, changed)
    return changed
