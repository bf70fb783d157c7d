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

The read-only calls of `terravixens check` and `drift` (terravixens.operations.observe) ask several nodes at once
(`--nodes a,b,c`): `services` prints a table `NODE SERVICE STATE HEALTH LAST CHANGE LAST EVENT`, `logs SERVICE` every
line as `<node>: <line>`, `health` only writes to stderr (`waiting for <check>: OK|SKIP|<error>`). talosctl 1.11–1.13
exits 0 when only SOME nodes failed, with `WARNING: N error(s) occurred:` and one `\t* <node>: <error>` line per node
on stderr (go-multierror, research 01): the answer is counted per node, never trusted on its exit code alone.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from terravixens import runner
from terravixens.runner import Ran

DEFAULT_TIMEOUT = 15 * 60
# talosctl gets the timeout itself (upgrade --timeout, health --wait-timeout) and reports it; the process is only
# ended after this grace, when talosctl did not stop on its own.
MAX_GRACE = 30
# A probe (`talosctl version` of a node that may be dead) is short: silence is the answer it looks for.
PROBE_TIMEOUT = 10
SERVER_TAG = re.compile(r"^Server:\s*$.*?^\s*Tag:\s*(\S+)\s*$", re.S | re.M)
SCHEMATIC_EXTENSION = "schematic"
MEMBER_ID = re.compile(r"^[0-9a-f]{1,16}$")
# go-multierror's per-node line: `\t* 10.0.0.13: rpc error: code = Unavailable desc = ...`
NODE_ERROR = re.compile(r"^\t\* (\S+): (.*)$")
NODE_BLOCK = re.compile(r"^\tNODE:\s+(\S+)\s*$")
BLOCK_TAG = re.compile(r"^\tTag:\s+(\S+)\s*$")
SERVICE_STATES = (
    "Initialized",
    "Starting",
    "Preparing",
    "Waiting",
    "Running",
    "Stopping",
    "Finished",
    "Failed",
    "Skipped",
)
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
class EtcdStatus:
    """One row of `talosctl etcd status` (NODE MEMBER DB SIZE IN USE LEADER RAFT INDEX RAFT TERM RAFT APPLIED INDEX
    LEARNER PROTOCOL STORAGE ERRORS): the member that answered through `node`, the leader it knows, its errors."""

    node: str
    member: str
    leader: str
    learner: bool
    errors: str


def etcd_statuses(listing: str) -> dict[str, EtcdStatus]:
    """node -> its row of `talosctl --nodes A,B,C etcd status` (tabwriter columns, three spaces apart: a size's own
    space stays in its cell); a node without a row did not answer (its WARNING line says why)."""
    found: dict[str, EtcdStatus] = {}
    for line in listing.splitlines():
        cells = re.split(r" {3,}", line.strip())
        if len(cells) >= 9 and MEMBER_ID.match(cells[1]):
            errors = cells[11] if len(cells) > 11 else ""
            found[cells[0]] = EtcdStatus(cells[0], cells[1], cells[4], cells[8] == "true", errors)
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


@dataclass(frozen=True)
class Service:
    """One row of `talosctl services`: NODE SERVICE STATE HEALTH LAST CHANGE LAST EVENT (HEALTH is `OK`, `Fail` or
    `?` when the service has no health check or none ran yet)."""

    node: str
    id: str
    state: str
    health: str
    last_event: str


def node_errors(stderr: str) -> dict[str, str]:
    """The nodes a multi-node call failed on, with their error: go-multierror's `\t* <node>: <error>` lines, in the
    WARNING talosctl 1.11–1.13 prints after a partial failure (exit 0) or in the error it exits 1 with. The node is
    the `--nodes` string verbatim (apid puts the target there)."""
    found: dict[str, str] = {}
    for line in stderr.splitlines():
        matched = NODE_ERROR.match(line)
        if matched:
            found.setdefault(matched.group(1), matched.group(2).strip())
    return found


def version_tags(version_output: str) -> dict[str, str]:
    """Each node's `Tag:` in `talosctl version` output, by its `NODE:` block (the Server section only: the Client block
    is the local binary). A node missing here did not answer, whatever the exit code says."""
    found: dict[str, str] = {}
    server, node = False, None
    for line in version_output.splitlines():
        if line.strip() == "Server:":
            server = True
            continue
        if not server:
            continue
        block = NODE_BLOCK.match(line)
        if block:
            node = block.group(1)
            continue
        tag = BLOCK_TAG.match(line)
        if tag and node is not None and node not in found:
            found[node] = tag.group(1)
    return found


def services(listing: str) -> list[Service]:
    """The rows of `talosctl services` (tabwriter columns, at least three spaces apart; LAST CHANGE is `19m27s ago`,
    LAST EVENT free text); the header and anything that is not a row are skipped."""
    found = []
    for line in listing.splitlines():
        cells = re.split(r" {3,}", line.strip())
        if len(cells) >= 4 and cells[2] in SERVICE_STATES:
            found.append(Service(cells[0], cells[1], cells[2], cells[3], cells[5] if len(cells) > 5 else ""))
    return found


def log_lines(output: str, nodes: Sequence[str]) -> dict[str, list[str]]:
    """`talosctl logs` output (`<node>: <line>`, whole lines, nodes interleaved) split per node; a line of a node not
    asked for is not a log line (nothing else is printed on stdout)."""
    found: dict[str, list[str]] = {node: [] for node in nodes}
    for line in output.splitlines():
        node, separator, text = line.partition(": ")
        if separator and node in found:
            found[node].append(text)
    return found


def health_failure(stderr: str) -> str:
    """What `talosctl health` was waiting for when it gave up: the last `waiting for <check>: <error>` line that is
    not `OK` or `SKIP` (with the per-node error lines under it), else its last line (`healthcheck error: …`)."""
    lines = [line.rstrip() for line in stderr.splitlines() if line.strip()]
    for index in range(len(lines) - 1, -1, -1):
        line = lines[index]
        if line.startswith("waiting for ") and not line.endswith((": OK", ": SKIP")):
            detail = [lines[index]]
            for follow in lines[index + 1 :]:
                if not follow.startswith("\t"):
                    break
                detail.append(follow.strip())
            return " ".join(detail)
    return lines[-1] if lines else "no message"


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
        ran = self.run(arguments)
        if ran.returncode not in (None, 0):
            # stderr is talosctl's whole transcript (`discovered nodes`, a line per check): the reason is the check it
            # gave up on, not the transcript's first lines
            return replace(ran, reason=f"exit {ran.returncode}: {health_failure(ran.stderr)}")
        return ran

    def etcd_members(self, address: str) -> Call:
        return self.run(["--nodes", address, "etcd", "members"])

    def services(self, addresses: Sequence[str]) -> Call:
        """`talosctl services` of several nodes at once (read-only)."""
        return self.run(["--nodes", ",".join(addresses), "services"])

    def logs(self, addresses: Sequence[str], service: str, tail: int) -> Call:
        """The last `tail` lines of a service's log on several nodes (read-only; talosctl has no --since: the caller
        filters by the time inside the lines)."""
        return self.run(["--nodes", ",".join(addresses), "logs", service, "--tail", str(tail)])

    def etcd_status(self, addresses: Sequence[str], deadline: float | None = None) -> Call:
        """`talosctl --nodes A,B,C etcd status`: a row per member that answers (etcd_statuses), a WARNING for the
        others (exit 0 while one answered); read-only."""
        return self.run(["--nodes", ",".join(addresses), "etcd", "status"], deadline=deadline)

    def shutdown(self, address: str) -> Call:
        """`talosctl shutdown` of one node, waiting (`--wait`, bounded by `--timeout`) until Talos has stopped its
        services: the machine powers off next. Without `--force`, Talos cordons and drains the node itself first
        (a node already cordoned stays as it is, and Talos does not uncordon it when it boots)."""
        return self.run(["--nodes", address, "shutdown", "--wait", "--timeout", f"{self.timeout}s"])

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
    "EtcdStatus",
    "Member",
    "Service",
    "ServiceState",
    "Talosctl",
    "etcd_statuses",
    "health_failure",
    "log_lines",
    "members",
    "node_errors",
    "schematic",
    "server_tag",
    "service_states",
    "services",
    "version_tags",
]
