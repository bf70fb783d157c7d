"""talosctl as the upgrades and the dead control plane removal call it: every call bounded in time, every failure an
answer, never an exception.

A rolling upgrade must be able to say where it stopped. So a call that cannot start (no binary, not executable),
that hangs past its deadline, or that fails, comes back as a `Call` (terravixens.runner.Ran) with a reason; the
caller decides to stop. Every call goes through the one runner: its own process group, ended as a whole at the
deadline (a wrapper script's children included), its pipes abandoned rather than waited for.

Output formats parsed here are talosctl's own (cmd/talosctl/cmd/talos in siderolabs/talos):
`version` prints `Client:` then, per node, `Server:` / `NODE:` / `Tag:`; `etcd members` a table
`NODE ID HOSTNAME PEER URLS CLIENT URLS LEARNER` (ids as 16 hex digits); `get extensions` a resource table
`NODE NAMESPACE TYPE ID VERSION NAME VERSION` where an Image Factory image carries an extension named `schematic`
whose version is the schematic id it was built from (the running image, unlike machine.install.image, which only
says what a future install would use); `service ID` one key/value block per node (NODE, ID, STATE, HEALTH, LAST HEALTH
MESSAGE when there is one, EVENTS newest first), tabwriter-aligned (pkg/machinery/formatters RenderServicesInfo).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from terravixens import runner
from terravixens.runner import Ran, parse_duration

DEFAULT_TIMEOUT = 15 * 60
# talosctl gets the timeout itself (upgrade --timeout, health --wait-timeout) and reports it; the process is only
# ended after this grace, when talosctl did not stop on its own.
MAX_GRACE = 30
# A probe (`talosctl version` of a node that may be dead) is short: silence is the answer it looks for.
PROBE_TIMEOUT = 10
SERVER_TAG = re.compile(r"^Server:\s*$.*?^\s*Tag:\s*(\S+)\s*$", re.S | re.M)
SCHEMATIC_EXTENSION = "schematic"
MEMBER_ID = re.compile(r"^[0-9a-f]{1,16}$")
SERVICE_FIELD = re.compile(r"^(NODE|ID|STATE|HEALTH|LAST HEALTH MESSAGE|EVENTS)(?: +(.*))?$")
# One call's answer: ok, stdout, reason (runner.Ran). The name stays for the upgrade's signatures.
Call = Ran


@dataclass(frozen=True)
class Member:
    """One row of `talosctl etcd members`."""

    id: str
    hostname: str
    peer_urls: str
    learner: bool


def server_tag(version_output: str) -> str | None:
    """The server's `Tag:` in `talosctl version` output (None without a Server section): the Talos version the node
    runs, as it prints it — parsing it into a release is the caller's business (terravixens.upgrade.TalosVersion)."""
    found = SERVER_TAG.search(version_output)
    return found.group(1) if found else None


def members(listing: str) -> list[Member]:
    """The rows of `talosctl etcd members` (NODE ID HOSTNAME PEER URLS CLIENT URLS LEARNER); the header and
    anything that is not a row (warnings) are skipped."""
    found = []
    for line in listing.splitlines():
        columns = line.split()
        if len(columns) >= 5 and MEMBER_ID.match(columns[1]):
            learner = columns[5] == "true" if len(columns) >= 6 else False
            found.append(Member(columns[1], columns[2], columns[3], learner))
    return found


@dataclass(frozen=True)
class ServiceState:
    """One node's block of `talosctl service ID`: its state (Initialized, Starting, Preparing, Waiting, Running,
    Stopping, Finished, Failed, Skipped), its health (`?` unknown, `OK`, `Fail`), the last health message and the
    newest event (`[Preparing]: Running pre state (17s ago)`)."""

    node: str
    id: str
    state: str
    health: str
    message: str = ""
    last_event: str = ""


def service_states(output: str) -> dict[str, ServiceState]:
    """node -> its block in `talosctl --nodes A,B service ID` output; lines that are not a block's (warnings, the
    older events) are skipped."""
    found: dict[str, ServiceState] = {}
    block: dict[str, str] = {}

    def close() -> None:
        if block.get("NODE") and block.get("STATE"):
            found[block["NODE"]] = ServiceState(
                block["NODE"],
                block.get("ID", ""),
                block["STATE"],
                block.get("HEALTH", ""),
                block.get("LAST HEALTH MESSAGE", ""),
                block.get("EVENTS", ""),
            )

    for line in output.splitlines():
        field = SERVICE_FIELD.match(line.rstrip())
        if field is None:
            continue
        key, value = field.group(1), (field.group(2) or "").strip()
        if key == "NODE":
            close()
            block = {}
        block.setdefault(key, value)
    close()
    return found


def schematic(extensions_output: str) -> str | None:
    """The schematic id the node booted (the `schematic` extension's version in `talosctl get extensions`), None
    when the node carries none (not an Image Factory image)."""
    for line in extensions_output.splitlines():
        columns = line.split()
        # NODE NAMESPACE TYPE ID VERSION NAME VERSION
        if len(columns) == 7 and columns[2] == "ExtensionStatus" and columns[5] == SCHEMATIC_EXTENSION:
            return columns[6]
    return None


def _subcommand(arguments: Sequence[str]) -> list[str]:
    """`etcd members`, `get extensions`, `service etcd`, `upgrade`: what names a call in a reason."""
    return list(arguments[:2]) if arguments[:1] in (["etcd"], ["get"], ["service"]) else list(arguments[:1])


@dataclass(frozen=True)
class Talosctl:
    binary: str = "talosctl"
    talosconfig: str = "talosconfig"
    timeout: int = DEFAULT_TIMEOUT
    probe_timeout: float = PROBE_TIMEOUT
    grace: float = runner.TERM_GRACE

    def run(self, arguments: Sequence[str], deadline: float | None = None) -> Call:
        """Every call starts with --nodes ADDRESS, then the subcommand (arguments[2]), which names it in reasons."""
        limit = deadline if deadline is not None else self.timeout + min(MAX_GRACE, self.timeout)
        label = " ".join(["talosctl", *_subcommand(arguments[2:])])
        ran = runner.run(
            [self.binary, "--talosconfig", self.talosconfig, *arguments], timeout=limit, label=label, grace=self.grace
        )
        if ran.timed_out:
            budget = f" (timeout {self.timeout}s)" if deadline is None else ""
            return Ran(
                ran.argv,
                None,
                ran.stdout,
                ran.stderr,
                f"{label} did not answer within {runner.seconds(limit)}{budget}: stopped with its process group",
                timed_out=True,
            )
        return ran

    def version(self, address: str) -> Call:
        return self.run(["--nodes", address, "version"])

    def probe(self, address: str) -> Call:
        """`talosctl version` with the short probe deadline: does the node answer at all?"""
        return self.run(["--nodes", address, "version"], deadline=self.probe_timeout)

    def extensions(self, address: str) -> Call:
        return self.run(["--nodes", address, "get", "extensions"])

    def upgrade(self, address: str, image: str) -> Call:
        return self.run(["--nodes", address, "upgrade", "--image", image, "--wait", "--timeout", f"{self.timeout}s"])

    def upgrade_k8s(self, address: str, target: str) -> Call:
        return self.run(["--nodes", address, "upgrade-k8s", "--to", target])

    def health(self, control_planes: Sequence[str], workers: Sequence[str]) -> Call:
        arguments = [
            "--nodes",
            control_planes[0],
            "health",
            "--control-plane-nodes",
            ",".join(control_planes),
            "--wait-timeout",
            f"{self.timeout}s",
        ]
        if workers:
            arguments += ["--worker-nodes", ",".join(workers)]
        return self.run(arguments)

    def etcd_members(self, address: str) -> Call:
        return self.run(["--nodes", address, "etcd", "members"])

    def etcd_remove_member(self, address: str, member_id: str) -> Call:
        return self.run(["--nodes", address, "etcd", "remove-member", member_id])

    def etcd_snapshot(self, address: str, path: str) -> Call:
        """`talosctl etcd snapshot PATH` through one control plane: etcd's Maintenance.Snapshot stream (the database
        and its sha256) written to PATH.part, renamed to PATH when complete (terravixens.etcd_snapshots verifies it)."""
        return self.run(["--nodes", address, "etcd", "snapshot", path])

    def reset_ephemeral(self, address: str) -> Call:
        """The disaster-recovery reset of one control plane: not graceful (its etcd is not asked to leave a cluster
        that has lost quorum), EPHEMERAL wiped (it holds /var/lib/etcd; STATE, the machine configuration and its
        certificates, stays), rebooted; talosctl waits (bounded by --timeout) until the node is back."""
        return self.run(
            [
                "--nodes",
                address,
                "reset",
                "--graceful=false",
                "--reboot",
                "--system-labels-to-wipe=EPHEMERAL",
                "--wait",
                "--timeout",
                f"{self.timeout}s",
            ]
        )

    def service(self, addresses: Sequence[str], service: str, deadline: float | None = None) -> Call:
        """`talosctl --nodes A,B,C service ID`: one block per node (service_states); a node that does not answer is a
        WARNING on stderr, exit 0 while another answered."""
        return self.run(["--nodes", ",".join(addresses), "service", service], deadline=deadline)

    def bootstrap_recover(self, address: str, snapshot: str, skip_hash_check: bool = False) -> Call:
        """`talosctl bootstrap --recover-from=FILE` on one control plane whose etcd waits (Preparing): talosctl reads
        the file's etcd status locally (`recovering from snapshot ...`), uploads it, and bootstraps etcd from it.
        `skip_hash_check`: the file is a `db` copied out of a data directory, without etcd's sha256 digest."""
        extra = ["--recover-skip-hash-check"] if skip_hash_check else []
        return self.run(["--nodes", address, "bootstrap", f"--recover-from={snapshot}", *extra])


__all__ = [
    "Call",
    "Member",
    "ServiceState",
    "Talosctl",
    "members",
    "parse_duration",
    "schematic",
    "server_tag",
    "service_states",
]
