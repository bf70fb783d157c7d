"""State backups: pulled through the backend (local or S3 alike: `terraform state pull`), written timestamped and
0600 under <root>/state-backups/<site>/<layer>/, then verified restorable before anything changes; and restore.

Verification reads the backup back with the strict JSON reader (same lineage, serial and resource count as what
was pulled) and has Terraform itself read it (`terraform show -json BACKUP` in the layer's directory). With the S3
backend, bucket versioning is a second, server-side backup (docs/commands.md).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from terravixens.exitcodes import ExitCode
from terravixens.inputs import InputError, load_json, read_text
from terravixens.operations.files import write_private
from terravixens.operations.outcome import OperationError
from terravixens.operations.terraform import Terraform

STATE_LIMIT = 1024 * 1024 * 1024
BACKUP_DIR = "state-backups"


@dataclass(frozen=True)
class StateInfo:
    lineage: str
    serial: int
    instances: int


@dataclass(frozen=True)
class Backup:
    path: Path
    info: StateInfo


def state_info(state: object, source: str) -> StateInfo:
    if (
        not isinstance(state, dict)
        or not isinstance(state.get("lineage"), str)
        or not isinstance(state.get("serial"), int)
    ):
        raise OperationError(
            f"{source}: not a Terraform state (no lineage and serial): give a file written by "
            f"`terraform state pull` or a terravixens backup",
            ExitCode.BAD_INPUT,
        )
    instances = sum(len(r.get("instances") or []) for r in state.get("resources") or [] if isinstance(r, dict))
    return StateInfo(state["lineage"], state["serial"], instances)


def pull_state(tf: Terraform, workdir: Path, layer: str) -> tuple[str, dict[str, Any] | None]:
    """The layer's state as text and JSON; (\"\", None) when the layer has no state yet."""
    result = tf.run(workdir, "state", "pull")
    if result.returncode != 0:
        raise OperationError(f"{layer}: terraform state pull failed:\n{result.tail()}", ExitCode.BACKUP_FAILED)
    if not result.stdout.strip():
        return "", None
    try:
        state = load_json(result.stdout, f"{layer} state", what="state")
    except InputError as error:
        raise OperationError(f"{layer}: the pulled state is not valid JSON:\n{error}", ExitCode.BACKUP_FAILED) from None
    if not isinstance(state, dict):
        raise OperationError(
            f"{layer}: the pulled state is not a Terraform state (a JSON object)", ExitCode.BACKUP_FAILED
        )
    return result.stdout, state


def local_state(workdir: Path, layer: str) -> tuple[str, dict[str, Any] | None] | None:
    """The layer's state read where its local backend keeps it, as `terraform state pull` would print it, without
    `terraform init` (which would install the layer's providers, and those of its state: talos, helm, kubernetes
    are not in the offline mirror). None when the layer's backend is not the local one (S3: pull it)."""
    try:
        source = workdir / "cdk.tf.json"
        document = load_json(read_text(source, limit=STATE_LIMIT, what="synthesized layer"), source)
    except InputError:
        return None
    backend = ((document.get("terraform") or {}).get("backend") or {}) if isinstance(document, dict) else {}
    path = (backend.get("local") or {}).get("path") if isinstance(backend, dict) else None
    if not isinstance(path, str):
        return None
    state_file = workdir / path
    if not state_file.exists():
        return "", None
    try:
        text = read_text(state_file, limit=STATE_LIMIT, what="state")
        state = load_json(text, f"{layer} state", what="state") if text.strip() else None
    except InputError as error:
        raise OperationError(f"{layer}: the local state is not readable:\n{error}", ExitCode.BACKUP_FAILED) from None
    if state is not None and not isinstance(state, dict):
        raise OperationError(
            f"{layer}: the local state is not a Terraform state (a JSON object)", ExitCode.BACKUP_FAILED
        )
    return text, state


def read_backup(path: Path) -> tuple[dict[str, Any], StateInfo]:
    try:
        state = load_json(read_text(path, limit=STATE_LIMIT, what="state backup"), path, what="state backup")
    except InputError as error:
        raise OperationError(str(error), ExitCode.BAD_INPUT) from None
    info = state_info(state, str(path))
    return cast(dict[str, Any], state), info  # state_info refused anything but a state object


def backup_state(tf: Terraform, workdir: Path, layer: str, site: str, root: Path, reason: str) -> Backup | None:
    """Pulls, writes and verifies a backup; None when the layer has no state yet. Raises before anything changes."""
    text, state = pull_state(tf, workdir, layer)
    if state is None:
        return None
    info = state_info(state, f"{layer} state")
    if not info.lineage:  # what an S3 backend answers before the first apply: nothing was ever written
        return None
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    folder = root / BACKUP_DIR / site / layer
    path = folder / f"{stamp}-serial{info.serial}-{reason}.tfstate"
    counter = 1
    while path.exists():
        counter += 1
        path = folder / f"{stamp}-serial{info.serial}-{reason}-{counter}.tfstate"
    write_private(path, text)
    verify_backup(tf, workdir, layer, path, info)
    return Backup(path, info)


def verify_backup(tf: Terraform, workdir: Path, layer: str, path: Path, expected: StateInfo) -> None:
    _, info = read_backup(path)
    if info != expected:
        raise OperationError(
            f"{path}: backup differs from the pulled state ({info} != {expected}): not using it", ExitCode.BACKUP_FAILED
        )
    shown = tf.run(workdir, "show", "-json", "-no-color", str(path))
    if shown.returncode != 0:
        raise OperationError(f"{path}: Terraform cannot read the backup back:\n{shown.tail()}", ExitCode.BACKUP_FAILED)
    try:
        load_json(shown.stdout, f"terraform show -json {path.name}", what="state")
    except InputError as error:
        raise OperationError(
            f"{path}: terraform show printed no valid JSON for the backup:\n{error}", ExitCode.BACKUP_FAILED
        ) from None


def restore_state(
    tf: Terraform, workdir: Path, layer: str, site: str, root: Path, path: Path, any_lineage: bool = False
) -> tuple[Backup | None, StateInfo]:
    """Pushes the backup at `path` as the layer's state, after backing up the current one.

    A backup of the same lineage replaces a newer serial (`state push -force`): that is the point of restoring.
    Another lineage is another state altogether: refused unless `any_lineage`.
    """
    _, wanted = read_backup(path)
    current = backup_state(tf, workdir, layer, site, root, "before-restore")
    if current is not None and current.info.lineage != wanted.lineage and not any_lineage:
        raise OperationError(
            f"{path}: lineage {wanted.lineage} is not the layer's ({current.info.lineage}): this backup belongs to "
            f"another state; pass --any-lineage only if you are sure",
            ExitCode.BAD_INPUT,
        )
    args = ["state", "push"]
    if current is not None:
        args.append("-force")
    pushed = tf.run(workdir, *args, str(path))
    if pushed.returncode != 0:
        raise OperationError(f"{layer}: terraform state push failed:\n{pushed.tail()}", ExitCode.FAILED)
    return current, wanted
