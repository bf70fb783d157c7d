"""etcd steps, shared by every command that touches etcd (snapshot, restore-etcd, remove-dead-member, decommission,
the control-plane steps of deploy and upgrade): the cluster's talosconfig, and a fresh, verified etcd snapshot
taken through a healthy control plane before a risky step (docs/adr/0030-etcd-snapshots.md).

A snapshot that cannot be taken or verified stops the step before anything changes (BACKUP_FAILED), unless the
operator said why not (`--no-snapshot REASON`): the reason is printed where the snapshot would have been, so the
log of the run says it was skipped and why. A step module, like terravixens.operations.steps: commands import it,
it imports no command.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from terravixens.config.addressing import node_address
from terravixens.etcd_snapshots import DEFAULT_KEEP, SnapshotError, SnapshotStore, StoreError, Taken
from terravixens.exitcodes import ExitCode
from terravixens.operations.console import Console
from terravixens.operations.files import private_directory, write_private
from terravixens.operations.outcome import OperationError
from terravixens.operations.terraform import Terraform
from terravixens.operations.workspace import Workspace
from terravixens.talosctl import Talosctl

TALOSCONFIG_OUTPUT = "talosconfig"
TALOSCONFIG_UNIT = "talosconfig"  # the journal's unit of platform_talosconfig


@dataclass(frozen=True)
class SnapshotPolicy:
    """How a command takes its automatic snapshots. `skip_reason`: the operator's `--no-snapshot REASON` (no
    snapshot, the reason printed instead); `keep`: retention per cluster; `require_tool`: refuse a snapshot that
    etcd's own code (tools/etcd-snapshot) could not judge."""

    skip_reason: str | None = None
    keep: int = DEFAULT_KEEP
    require_tool: bool = False

    def __post_init__(self) -> None:
        if self.skip_reason is not None and not self.skip_reason.strip():
            raise ValueError("--no-snapshot needs a reason, e.g. --no-snapshot 'etcd restored from backup at 10:02'")


def control_plane_addresses(ws: Workspace, cluster_name: str) -> dict[str, str]:
    """Control plane name -> the address talosctl reaches it at (its first-contact address), by name."""
    cluster = ws.site.clusters[cluster_name]
    return {
        name: node_address(node.networks, cluster.management_vlan)
        for name, node in sorted(cluster.control_planes.items())
    }


def talosconfig_of(tf: Terraform, workdir: Path) -> str | None:
    """The platform layer's `talosconfig` output; None when the layer has none (no cluster yet, or gone)."""
    result = tf.output(workdir, TALOSCONFIG_OUTPUT)
    return result.stdout if result.returncode == 0 and result.stdout.strip() else None


@contextlib.contextmanager
def talosconfig_file(ws: Workspace, tf: Terraform, cluster_name: str, given: str | None) -> Iterator[str]:
    """The talosconfig talosctl is given: the operator's file (`--talosconfig`) when given, else the platform
    layer's output written 0600 into a 0700 temporary folder that is removed afterwards (it holds the cluster's
    admin key: never left behind, never printed)."""
    if given:
        yield given
        return
    layer = ws.platform_layer(cluster_name).name
    text = talosconfig_of(tf, ws.stack_dir(layer))
    if text is None:
        raise OperationError(
            f"{layer} has no talosconfig output (not applied, or its state is elsewhere): give one with "
            f"--talosconfig FILE",
            ExitCode.BAD_INPUT,
        )
    with private_directory("terravixens-talosconfig-") as folder:
        yield str(write_private(folder / "talosconfig", text))


@contextlib.contextmanager
def platform_talosconfig(
    ws: Workspace, tf: Terraform, console: Console, cluster_name: str, given: str | None
) -> Iterator[str]:
    """talosconfig_file for a command: the operator's file when given (nothing else runs), else the platform layer
    initialised (`terraform init`: its backend must be known before its outputs can be read) and its output
    written privately, as the journal's unit `talosconfig`. The layer must have been synthesized."""
    if given:
        yield given
        return
    layer = ws.platform_layer(cluster_name).name
    with contextlib.ExitStack() as stack:
        with console.journal.unit(TALOSCONFIG_UNIT):
            console.step(layer, "init")
            tf.init(ws.stack_dir(layer), layer)
            path = stack.enter_context(talosconfig_file(ws, tf, cluster_name, None))
            console.step(layer, "talosconfig", "the layer's output, in a private temporary file removed afterwards")
        yield path


def _fetch(talosctl: Talosctl, address: str, path: Path) -> object:
    """`talosctl etcd snapshot PATH` through one control plane: the store's fetch for that node."""
    return talosctl.etcd_snapshot(address, str(path))


def fresh_snapshot(
    ws: Workspace,
    cluster_name: str,
    talosctl: Talosctl,
    console: Console,
    reason: str,
    policy: SnapshotPolicy | None = None,
    avoid: Sequence[str] = (),
    purpose: str | None = None,
) -> Taken | None:
    """A new etcd snapshot of the cluster, verified and kept (0600 in etcd-snapshots/<site>/<cluster>/, retention
    applied), taken through the first control plane that gives one — by name, those in `avoid` (e.g. the node about
    to leave, or a dead one) last. Returns None when the policy skips it (the reason printed); raises an
    OperationError (BACKUP_FAILED) when no control plane gives a verified snapshot: nothing was changed.

    `reason` names the snapshot file; the lines say "before <reason>" unless `purpose` says what it is for
    (`terravixens snapshot`: "on request")."""
    policy = policy or SnapshotPolicy()
    layer = ws.platform_layer(cluster_name).name
    purpose = purpose or f"before {reason}"
    if policy.skip_reason is not None:
        console.step(layer, "snapshot", f"skipped {purpose}: {policy.skip_reason} (--no-snapshot)")
        return None
    store = SnapshotStore(ws.root, ws.site.site, keep=policy.keep, require_tool=policy.require_tool)
    check_store(store, cluster_name)
    addresses = control_plane_addresses(ws, cluster_name)
    order = [name for name in addresses if name not in avoid] + [name for name in addresses if name in avoid]
    failures: list[str] = []
    for name in order:
        try:
            taken = store.take(
                cluster_name,
                name,
                _reason_token(reason),
                partial(_fetch, talosctl, addresses[name]),
            )
        except StoreError as error:  # the store, not the node: no other control plane changes that
            raise OperationError(f"{error}; nothing was changed", ExitCode.BAD_INPUT) from None
        except SnapshotError as error:
            failures.append(str(error))
            console.step(layer, "snapshot", f"through {name}: {error}")
            continue
        where = _shown(taken.snapshot.path, ws.root)
        console.step(layer, "snapshot", f"{where} through {name}, {purpose}: {taken.summary().split(': ', 1)[1]}")
        return taken
    raise OperationError(
        f"{layer}: no verified etcd snapshot {purpose} ({len(failures)} control plane"
        f"{'s' if len(failures) != 1 else ''} tried); nothing was changed. Fix what the lines above say, or — "
        f"knowing the risk — pass --no-snapshot REASON",
        ExitCode.BACKUP_FAILED,
    )


def check_store(store: SnapshotStore, cluster_name: str) -> None:
    """The snapshot store usable before any node is asked for a snapshot: its folders real 0700 folders of this user
    (created if missing), every manifest readable by the strict reader; BAD_INPUT (one line) otherwise."""
    try:
        store.preflight(cluster_name)
    except StoreError as error:
        raise OperationError(f"{error}; nothing was done", ExitCode.BAD_INPUT) from None


def _reason_token(reason: str) -> str:
    """The reason as it appears in the snapshot's file name: lower case, letters, digits and dashes."""
    token = "".join(char if char.isalnum() else "-" for char in reason.lower())
    return "-".join(part for part in token.split("-") if part)[:40] or "manual"


def _shown(path: Path, root: Path) -> str:
    with contextlib.suppress(ValueError):
        return str(path.relative_to(root))
    return str(path)


__all__ = [
    "TALOSCONFIG_UNIT",
    "SnapshotPolicy",
    "check_store",
    "control_plane_addresses",
    "fresh_snapshot",
    "platform_talosconfig",
    "talosconfig_file",
    "talosconfig_of",
]
