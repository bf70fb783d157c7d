"""A fake `talosctl` for the upgrade tests, driven by a scenario file (JSON), touching nothing.

    python fake_talosctl.py SCENARIO --talosconfig FILE --nodes ADDRESS COMMAND ...

Tests write a two-line wrapper named `talosctl` into their tmp_path that execs this file with their scenario.
The scenario holds the state it answers from and records every call (under a lock: batches call it in parallel):

    versions            address -> running Talos version (`version` answers it, `upgrade` sets it from --image);
                        any text: talosctl prints the Tag it gets from the node
    schematics          address -> schematic id of the image the node booted (`get extensions` lists it as the
                        Image Factory's `schematic` extension; `upgrade` sets it from --image; absent: no such row,
                        as on a node not booted from a factory image)
    images              schematic id -> [[name, version], ...]: the system extensions that image carries, which
                        `get extensions` lists before the `schematic` row (the factory appends it last), IDs 0, 1, …
                        as recent images number their extension files; a real node adds `modules.dep` when an
                        extension ships kernel modules
    rolls_back          addresses whose `upgrade --wait` returns 0 but which come back on their previous version and
                        image: Talos' A/B fallback after the new image failed to boot (a real talosctl upgrade --wait
                        would show the reboot and the node coming back; the fake only keeps the old state)
    broken              addresses that make `health` fail (a node that is down)
    breaks_on_upgrade   addresses that join `broken` when upgraded (an upgrade that leaves the node unhealthy)
    health_script       answers (true/false) for the next `health` calls, before the rules above apply
    fail                command (or "command subcommand") -> addresses whose call exits 1 ("*" for any)
    hang                command (or "command subcommand") -> addresses whose call never returns ("*" for any): a
                        child holds the output pipes, as a wrapper would, so only ending the process group ends
                        it; the fake's pid and its child's are appended to SCENARIO.hung
    together            addresses whose `upgrade` calls must overlap in time: each waits (together_wait
                        seconds, default 10) until all have started, and fails if they do not (a batch run one
                        by one)
    unreachable         addresses that do not answer at all: every call through them fails as talosctl reports it
                        when apid cannot dial the node (exit 1, `rpc error: code = Unavailable ... no route to host`)
    version_script      address -> answers (true/false) for its next `version` calls, before `unreachable`
                        applies: a node that comes back between two probes (a reboot, a network blip)
    members             the etcd members: [{"id": 16 hex digits, "hostname", "address", "learner": optional}];
                        `etcd members` through a reachable node prints them as talosctl does (NODE ID HOSTNAME
                        PEER URLS CLIENT URLS LEARNER), `etcd remove-member ID` removes one; `health` with
                        --control-plane-nodes fails, as talosctl's "etcd members to be control plane nodes" check
                        does, when a member's address is not among them
    calls               appended: the arguments of every call (tests may append their own entries, e.g. the
                        terraform calls, to see the order of everything)
    kubernetes          set by upgrade-k8s --to
    shutdown            appended by `shutdown`: the nodes told to power off (talosctl's tracker lines on stderr, as
                        without a terminal: `"<node>": <message>`; the test makes the machine go down, or not)

etcd's quorum: `etcd members` through a node needs a leader (talosctl asks WithRequireLeader), so it fails with
`etcdserver: no leader` while fewer than a majority of `members` are reachable (not in `unreachable`); `etcd status`
of several nodes prints a row for each reachable one and a WARNING for the others (`unreachable` or `broken`).

`etcd snapshot` / `etcd status` and the disaster recovery's `reset`, `service etcd` and `bootstrap --recover-from`
have their own blocks below, each with its scenario keys.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import re
import subprocess
import sys
import time

scenario_path, arguments = sys.argv[1], sys.argv[2:]
node = arguments[arguments.index("--nodes") + 1]
command = arguments[4]


@contextlib.contextmanager
def scenario():
    with open(scenario_path + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with open(scenario_path) as source:
            state = json.load(source)
        yield state
        # written whole, then renamed: a test reading the scenario without the lock never sees a half-written file
        with open(f"{scenario_path}.{os.getpid()}", "w") as target:
            json.dump(state, target)
        os.replace(f"{scenario_path}.{os.getpid()}", scenario_path)


def listed(table: str) -> bool:
    """The node is listed under the command (`etcd`) or the command and its subcommand (`etcd remove-member`)."""
    with scenario() as state:
        entries = state.get(table, {})
        addresses = entries.get(command, []) + entries.get(" ".join(arguments[4:6]), [])
    return node in addresses or "*" in addresses


with scenario() as state:
    state["calls"].append(arguments)
    if command == "upgrade":
        state.setdefault("started", []).append(node)

if listed("hang"):
    with open(scenario_path + ".hung", "a") as hung:
        child = subprocess.Popen(["sleep", "3600"])  # inherits the output pipes, like a wrapper's helper
        hung.write(f"{os.getpid()} {child.pid}\n")
    child.wait()
    sys.exit(0)
if listed("fail"):
    print(f"error: {command} on {node} failed: rpc error: code = Unavailable", file=sys.stderr)
    sys.exit(1)

with scenario() as state:
    script = state.get("version_script", {}).get(node, [])
    answers = script.pop(0) if command == "version" and script else node not in state.get("unreachable", [])
if not answers:
    # apid cannot dial the node (cmd/talosctl: "error getting version from node X: ..." / "error from node X: ...")
    prefix = "error getting version from node" if command == "version" else "error from node"
    print(
        f'{prefix} {node}: rpc error: code = Unavailable desc = connection error: desc = "transport: Error while '
        f'dialing: dial tcp {node}:50000: connect: no route to host"',
        file=sys.stderr,
    )
    sys.exit(1)


# ------------------------------------------------------------------- disaster recovery: reset, service, bootstrap
# `talosctl reset`, `talosctl service etcd` and `talosctl bootstrap --recover-from`, and what etcd's state on a node
# does to `etcd members`, `etcd snapshot` and `health`, as talosctl 1.11-1.13 print them
# (cmd/talosctl/cmd/talos/{reset,service,bootstrap}.go, pkg/machinery/formatters RenderServicesInfo, the action
# tracker's lines when stderr is not a terminal; docs: disaster-recovery). Scenario keys:
#   etcd_service   address -> {"state", "health", "message", "events": [[state, message], newest first]}; absent: etcd
#                  Running, health OK, the events of a normal start. Through a node whose etcd is not Running,
#                  `etcd members` and `etcd snapshot` fail (nothing listens on 127.0.0.1:2379); through one Running
#                  whose health is not OK (no leader: quorum lost), `etcd members` fails (talosctl asks with
#                  WithRequireLeader) while `etcd snapshot` still streams the member's own database. [error texts
#                  inferred from clientv3: the exact wording on a real node may differ]
#   after_reset    the states a node's etcd goes through after its reset, one per `service etcd` call (default
#                  ["Waiting", "Preparing"]); the last one stays (["Waiting"]: a node that never gets to Preparing)
#   wiped          set by reset: nodes whose EPHEMERAL partition (etcd's data) was wiped
#   etcd_tool      the etcd-snapshot binary (tests/etcd_tool.py): `bootstrap --recover-from` reads the file's status
#                  with it, as talosctl reads it locally with etcdutl before uploading it
#   recovered      set by a bootstrap --recover-from that was accepted: {"node", "file", "skip_hash_check", and what
#                  it read: "sha256" of the file, its "mode" and its folder's "folder_mode"}
# After an accepted recovery the node's etcd restores the file: a file without etcd's digest and no
# --recover-skip-hash-check, or a digest that does not match, leaves its etcd Failed (etcdutl refuses it on the node,
# after talosctl returned 0); otherwise its etcd and every other wiped control plane waiting in Preparing are Running
# (the others join once the control plane endpoint is up) and `members` lists them with new ids.
# A real cluster adds the reboots (minutes each), etcd's own restore log (`talosctl logs etcd`) and the Kubernetes
# control plane coming back.
import tempfile  # noqa: E402  (this block stays self-contained)
from hashlib import sha256  # noqa: E402


def _go_duration(seconds: int) -> str:
    """Go's time.Duration.Round(time.Second).String() for whole seconds."""
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"


def _two_columns(rows: list[tuple[str, str]]) -> str:
    """Go's tabwriter (padding 3, spaces) over key/value lines: one column block for the whole output."""
    width = max(len(key) for key, _ in rows) + 3
    return "".join(f"{key.ljust(width)}{value}\n" for key, value in rows)


EVENT_TEXT = {
    "Waiting": 'Waiting for service "cri" to be "up", time sync',
    "Preparing": "Running pre state",
    "Running": "Health check successful",
}
STARTED = [
    ["Running", "Health check successful"],
    ["Running", "Started task etcd (PID 2519) for container etcd"],
    ["Preparing", "Creating service runner"],
    ["Preparing", "Running pre state"],
    ["Waiting", 'Waiting for service "cri" to be "up", time sync'],
]
ETCD_DOWN = (
    'rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial tcp '
    '127.0.0.1:2379: connect: connection refused"'
)
NO_LEADER = "rpc error: code = Unavailable desc = etcdserver: no leader"
NOT_EMPTY = "rpc error: code = AlreadyExists desc = etcd data directory is not empty"


def _etcd_of(state: dict, address: str) -> dict:
    found = state.get("etcd_service", {}).get(address)
    return found if found is not None else {"state": "Running", "health": "OK", "events": STARTED}


def _errors(entries: list[str]) -> str:
    """hashicorp/go-multierror's text, as talosctl's multi-node errors print it."""
    count = len(entries)
    points = "\n\t".join(f"* {entry}" for entry in entries)
    return f"{count} error{'s' if count > 1 else ''} occurred:\n\t{points}\n\n"


def _unreachable(address: str) -> str:
    return (
        f'{address}: rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: '
        f'dial tcp {address}:50000: connect: no route to host"'
    )


def _status_of(path: str, tool: str) -> tuple[dict | None, bool, bool]:
    """(etcd status of the file's database, the file carries a digest, the digest matches): what etcdutl's Status
    reads (it ignores the digest), computed by the etcd-snapshot tool on the database with a digest appended."""
    with open(path, "rb") as source:
        data = source.read()
    digested = len(data) % 512 == 32
    database = data[:-32] if digested else data
    matches = digested and sha256(database).digest() == data[-32:]
    with tempfile.TemporaryDirectory() as folder:
        copy = os.path.join(folder, "status.snapshot")
        with open(copy, "wb") as target:
            target.write(database + sha256(database).digest())
        ran = subprocess.run([tool, "verify", copy], capture_output=True, text=True, timeout=120)
    try:
        report = json.loads(ran.stdout)
    except ValueError:
        report = {"ok": False}
    return (report if report.get("ok") else None), digested, matches


def _wipe_real_member(where: str, address: str) -> None:
    """The real member standing for `address`: its process ended (SIGTERM, SIGKILL after 10s) and its data directory
    removed; the description says it no longer runs."""
    import shutil
    import signal

    with open(where) as described:
        cluster = json.load(described)
    for member in cluster["members"].values():
        if member["node"] != address:
            continue
        if member["running"] and member["pid"]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(member["pid"], signal.SIGCONT)
                os.kill(member["pid"], signal.SIGTERM)
            until = time.monotonic() + 10
            while time.monotonic() < until:
                try:
                    with open(f"/proc/{member['pid']}/status") as status:
                        if "\nState:\tZ" in status.read():
                            break
                except FileNotFoundError:
                    break
                time.sleep(0.05)
            with contextlib.suppress(ProcessLookupError):
                os.kill(member["pid"], signal.SIGKILL)
        shutil.rmtree(member["data_dir"], ignore_errors=True)
        member["running"] = False
    with open(f"{where}.{os.getpid()}", "w") as target:
        json.dump(cluster, target)
    os.replace(f"{where}.{os.getpid()}", where)


def _wait_for_real_recovery(timeout: float = 120) -> None:
    """An accepted recovery on real members: the test's supervisor restores the file into the node's member with
    etcdutl and starts it (then the other wiped control planes join it), and marks `recovered` started — or failed,
    with etcdutl's answer. talosctl's bootstrap returns before etcd is up on a real node; here it returns once the
    supervisor has done it, so that what comes next (health) reads the restored cluster."""
    until = time.monotonic() + timeout
    while time.monotonic() < until:
        with scenario() as state:
            recovered = state.get("recovered") or {}
        if recovered.get("started") or recovered.get("failed"):
            return
        time.sleep(0.1)
    print("fake talosctl: the test's supervisor did not start the recovered member", file=sys.stderr)
    sys.exit(1)


def _disaster_recovery() -> None:
    """The commands and conditions of this block; returns when the call is not one of them."""
    targets = node.split(",")
    with scenario() as state:
        modelled = "etcd_service" in state or command in ("reset", "service", "bootstrap")
    if not modelled:
        return
    if command == "reset":
        if len(targets) > 1 or not {"--graceful=false", "--reboot", "--system-labels-to-wipe=EPHEMERAL"} <= set(
            arguments
        ):
            print(f"fake talosctl: only the disaster-recovery reset of one node is modelled, not {arguments[4:]}")
            sys.exit(2)
        with scenario() as state:
            entry = {"after": list(state.get("after_reset") or ["Waiting", "Preparing"]), "events": []}
            entry.update(state=entry["after"][0], health="?")
            state.setdefault("etcd_service", {})[node] = entry
            state.setdefault("wiped", []).append(node)
            if state.get("etcd"):  # a real member on this node: its etcd stopped, EPHEMERAL (its data) wiped
                _wipe_real_member(state["etcd"], node)
        if "--wait=false" not in arguments:
            for line in (
                "waiting for actor ID",
                "actor ID: 8f2c1a9e-5d0b-4c4e-9a61-3b7e2d4f0c15",
                "unavailable, retrying...",
                "post check passed",
            ):
                print(f'"{node}": {line}', file=sys.stderr)
        sys.exit(0)
    if command == "service":
        if arguments[5:6] != ["etcd"] or len(arguments) > 6:
            print(f"fake talosctl: only `service etcd` is modelled, not {arguments[4:]}", file=sys.stderr)
            sys.exit(2)
        rows: list[tuple[str, str]] = []
        failed: list[str] = []
        with scenario() as state:
            unreachable = state.get("unreachable", [])
            for target in targets:
                if target in unreachable:
                    failed.append(_unreachable(target))
                    continue
                etcd = _etcd_of(state, target)
                after = etcd.get("after") or []
                if after:  # a node after its reset: one state further per call, the last one stays
                    etcd["state"] = after.pop(0) if len(after) > 1 else after[0]
                    if not etcd["events"] or etcd["events"][0][0] != etcd["state"]:
                        etcd["events"].insert(0, [etcd["state"], EVENT_TEXT.get(etcd["state"], etcd["state"])])
                    etcd["health"] = "OK" if etcd["state"] == "Running" else "?"
                rows += [("NODE", target), ("ID", "etcd"), ("STATE", etcd["state"]), ("HEALTH", etcd["health"])]
                if etcd.get("message"):
                    rows.append(("LAST HEALTH MESSAGE", etcd["message"]))
                for index, (when, text) in enumerate(etcd.get("events") or []):
                    rows.append(
                        ("EVENTS" if index == 0 else "", f"[{when}]: {text} ({_go_duration(2 + 4 * index)} ago)")
                    )
        if failed and not rows:
            print(f"error listing services: {_errors(failed)}", file=sys.stderr)
            sys.exit(1)
        if failed:
            print(f"WARNING: {_errors(failed)}", file=sys.stderr)
        sys.stdout.write(_two_columns(rows))
        sys.exit(0)
    if command == "bootstrap":
        if len(targets) > 1:
            print('command "bootstrap" is not supported with multiple nodes', file=sys.stderr)
            sys.exit(1)
        given = [argument.split("=", 1)[1] for argument in arguments if argument.startswith("--recover-from=")]
        if not given:
            print("fake talosctl: only `bootstrap --recover-from=FILE` is modelled", file=sys.stderr)
            sys.exit(2)
        path, skip = given[0], "--recover-skip-hash-check" in arguments
        if not os.path.isfile(path):
            print(f"open {path}: no such file or directory", file=sys.stderr)
            sys.exit(1)
        with scenario() as state:
            tool = state["etcd_tool"]
        status, digested, matches = _status_of(path, tool)
        if status is None:
            print("invalid database", file=sys.stderr)
            sys.exit(1)
        print(
            f'recovering from snapshot "{path}": hash {status["etcd_hash"]}, revision {status["revision"]}, total keys '
            f"{status['total_keys']}, total size {status['total_size']}"
        )
        with scenario() as state:
            etcd = _etcd_of(state, node)
            if etcd["state"] != "Preparing":
                print(
                    "error uploading snapshot: rpc error: code = FailedPrecondition desc = etcd service is not ready "
                    "for recovery yet",
                    file=sys.stderr,
                )
                sys.exit(1)
            if node not in state.get("wiped", []):
                print(
                    f"error executing bootstrap: {_errors([f'{node}: {NOT_EMPTY}'])}",
                    file=sys.stderr,
                )
                sys.exit(1)
            with open(path, "rb") as uploaded:  # what talosctl uploads, and how private the file it read was
                read = sha256(uploaded.read()).hexdigest()
            state["recovered"] = {
                "node": node,
                "file": path,
                "skip_hash_check": skip,
                "sha256": read,
                "mode": oct(os.stat(path).st_mode & 0o777),
                "folder_mode": oct(os.stat(os.path.dirname(path)).st_mode & 0o777),
            }
            delegated = bool(state.get("etcd"))
            refused = ""
            if not digested and not skip:
                refused = "snapshot missing hash but --skip-hash-check=false"
            elif digested and not matches and not skip:
                refused = "expected sha256 of the snapshot does not match its digest"
            services = state.setdefault("etcd_service", {})
            if refused:
                services[node] = {
                    "state": "Failed",
                    "health": "?",
                    "events": [
                        ["Failed", f"Failed to run pre stage: failed to recover etcd: {refused}"],
                        *etcd["events"],
                    ],
                }
            else:
                joined = [
                    address for address in state.get("wiped", []) if _etcd_of(state, address)["state"] == "Preparing"
                ]
                for address in joined:
                    services[address] = {"state": "Running", "health": "OK", "events": STARTED}
                names = {member["address"]: member["hostname"] for member in state.get("members", [])}
                state["members"] = [
                    {
                        "id": sha256(f"{address}-recovered".encode()).hexdigest()[:16],
                        "hostname": names.get(address, address),
                        "address": address,
                    }
                    for address in [node, *sorted(set(joined) - {node})]
                ]
        if delegated and not refused:
            _wait_for_real_recovery()
        sys.exit(0)
    with scenario() as state:
        etcd = _etcd_of(state, node) if len(targets) == 1 else None
        control_planes = (
            arguments[arguments.index("--control-plane-nodes") + 1].split(",")
            if "--control-plane-nodes" in arguments
            else []
        )
        not_running = [(a, _etcd_of(state, a)) for a in control_planes if _etcd_of(state, a)["state"] != "Running"]
    if command == "health" and not_running:
        lines = [
            f'{address}: service "etcd" not in expected state "Running": current state [{etcd["state"]}] '
            f"{(etcd.get('events') or [['', '']])[0][1]}"
            for address, etcd in not_running
        ]
        print(f"waiting for etcd to be healthy: {_errors(lines)}".rstrip("\n"), file=sys.stderr)
        print("healthcheck error: rpc error: code = Unknown desc = context deadline exceeded", file=sys.stderr)
        sys.exit(1)
    if etcd is None or arguments[4:6] not in (["etcd", "members"], ["etcd", "snapshot"]):
        return
    if etcd["state"] != "Running":
        what = "error getting members" if arguments[5] == "members" else "error reading file"
        print(f"{what}: {_errors([f'{node}: {ETCD_DOWN}'])}", file=sys.stderr)
        sys.exit(1)
    if arguments[5] == "members" and etcd.get("health") != "OK":
        print(
            f"error getting members: {_errors([f'{node}: {NO_LEADER}'])}",
            file=sys.stderr,
        )
        sys.exit(1)


# --------------------------------------------------------------------------------------- etcd answered by real etcd
# With the scenario key `etcd` (the path of the description tests/control_plane.py's EtcdCluster keeps: which member
# runs on which node, its URLs, whether its process runs, the client's TLS files), `etcd members`, `etcd status`,
# `etcd remove-member` and `etcd snapshot` are answered by real etcd members. tools/etcd/machined makes the calls
# Talos' machined makes for them (internal/app/machined/internal/server/v1alpha1): MemberList on the node's own member
# with WithRequireLeader (talosctl asks QueryLocal), Status and Snapshot of the node's own member, MemberRemove through
# every control plane's endpoint with WithRequireLeader (member not found is NotFound, anything else machined wraps).
# This prints what talosctl prints of the answer; the gRPC status is the one machined's server sends for that error.
# `health` reads its member list from there too. A real cluster adds apid's proxying and Talos' own etcd client
# certificates; the node's address is only a name here (the members listen on loopback).
def _humanize_bytes(size: int) -> str:
    """go-humanize's Bytes (SI units), as talosctl prints DB SIZE and IN USE."""
    if size < 10:
        return f"{size} B"
    exponent = math.floor(math.log(size) / math.log(1000))
    value = math.floor(size / 1000**exponent * 10 + 0.5) / 10
    return ("%.0f %s" if value >= 10 else "%.1f %s") % (value, ["B", "kB", "MB", "GB", "TB", "PB", "EB"][exponent])


def _tabwriter(rows: list[list[str]]) -> str:
    """Go's tabwriter (minwidth 0, tabwidth 0, padding 3, spaces): every cell but a line's last one is padded to its
    column's width plus 3."""
    widths = [max(len(row[column]) for row in rows) + 3 for column in range(len(rows[0]) - 1)]
    # The last cell is not padded: zip stops at the last width on purpose.
    return "".join(
        "".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)) + row[-1] + "\n" for row in rows
    )


def _real_members(where: str) -> list[dict]:
    """The member list, as the first running member answers it ([] when none does): for `health`."""
    with open(where) as described:
        cluster = json.load(described)
    nodes = {name: m["node"] for name, m in cluster["members"].items()}
    for member in cluster["members"].values():
        if member["running"]:
            answer = _machined(cluster, [member["client_url"]], "members")
            if "members" in answer:
                return [
                    {"id": m["id"], "hostname": m["name"], "address": nodes.get(m["name"], ""), "learner": m["learner"]}
                    for m in answer["members"]
                ]
    return []


def _machined(cluster: dict, endpoints: list[str], *call: str, timeout: float = 5) -> dict:
    done = subprocess.run(
        [
            cluster["machined"],
            f"-endpoints={','.join(endpoints)}",
            f"-cacert={cluster['cacert']}",
            f"-cert={cluster['cert']}",
            f"-key={cluster['key']}",
            f"-timeout={timeout}s",
            *call,
        ],
        capture_output=True,
        text=True,
        timeout=timeout + 30,
    )
    try:
        return json.loads(done.stdout)
    except ValueError:
        return {"error": done.stderr.strip() or f"machined exited {done.returncode}", "code": "Unknown"}


def _rpc(answer: dict, message: str | None = None) -> str:
    return f"rpc error: code = {answer['code']} desc = {message or answer['error']}"


def _real_etcd() -> None:
    """The etcd commands answered by the real members; returns when the call is not one of them."""
    with scenario() as state:
        where, damage = state.get("etcd"), (state.get("etcd_snapshot") or {}).get("damage")
    subcommand = arguments[5] if len(arguments) > 5 else ""
    if not where or command != "etcd" or subcommand not in ("members", "status", "remove-member", "snapshot"):
        return
    with open(where) as described:
        cluster = json.load(described)
    # a member whose process does not run is no member on its node (Talos' local client: connection refused)
    on_node = {m["node"]: m for m in cluster["members"].values() if m["running"]}
    targets = node.split(",")
    if subcommand == "members":
        member = on_node.get(node)
        if member is None:
            print(f"error getting members: {_errors([f'{node}: {DIAL_ETCD}'])}", file=sys.stderr)
            sys.exit(1)
        answer = _machined(cluster, [member["client_url"]], "members")
        if "error" in answer:
            print(f"error getting members: {_errors([f'{node}: {_rpc(answer)}'])}", file=sys.stderr)
            sys.exit(1)
        rows = [["NODE", "ID", "HOSTNAME", "PEER URLS", "CLIENT URLS", "LEARNER"]]
        rows += [
            [node, m["id"], m["name"], ",".join(m["peer_urls"]), ",".join(m["client_urls"]), str(m["learner"]).lower()]
            for m in answer["members"]
        ]
        widths = [max(len(row[i]) for row in rows) for i in range(6)]
        for row in rows:
            print("   ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
        sys.exit(0)
    if subcommand == "remove-member":
        wanted = arguments[6]
        endpoints = [m["client_url"] for m in cluster["members"].values()]  # every control plane's, dead or alive
        answer = _machined(cluster, endpoints, "remove-member", wanted)
        if "error" in answer:
            decimal = int(wanted, 16)
            if answer["error"] == "etcdserver: member not found":
                text = _rpc({"code": "NotFound"}, f"failed to remove member {decimal}: {answer['error']}")
            else:
                text = _rpc(answer, f"failed to remove member: failed to remove member {decimal}: {answer['error']}")
            print(f"error from node {node}: {text}", file=sys.stderr)
            sys.exit(1)
        sys.exit(0)
    if subcommand == "snapshot":
        if len(targets) > 1:
            print('error: command "etcd snapshot" is not supported with multiple nodes', file=sys.stderr)
            sys.exit(1)
        member = on_node.get(node)
        db_path = arguments[6]
        part_path = db_path + ".part"
        answer = (
            _machined(cluster, [member["client_url"]], "snapshot", part_path, timeout=60)
            if member
            else {"error": DIAL_ETCD.split("desc = ", 1)[1], "code": "Unavailable"}
        )
        if "error" in answer:
            with contextlib.suppress(FileNotFoundError):
                os.remove(part_path)
            print(f"error: error reading file: {_rpc(answer)}", file=sys.stderr)
            sys.exit(1)
        with open(part_path, "rb") as source:
            stream = bytearray(source.read())
        if damage == "flip":
            stream[len(stream) // 2] ^= 0x01
        elif damage == "cut":
            stream = stream[: len(stream) // 2 + 100]
        with open(part_path, "wb") as target:
            target.write(stream)
        if len(stream) % 512 != 32:
            os.remove(part_path)
            print(f"error: sha256 checksum not found (size {len(stream)})", file=sys.stderr)
            sys.exit(1)
        os.rename(part_path, db_path)
        print(f'etcd snapshot saved to "{db_path}" ({len(stream)} bytes)')
        read = subprocess.run(
            [cluster["etcdutl"], "snapshot", "status", db_path, "-w", "json"], capture_output=True, text=True
        )
        with contextlib.suppress(ValueError, KeyError):
            info = json.loads(read.stdout)
            print(
                f"snapshot info: hash {info['hash']:08x}, revision {info['revision']}, total keys "
                f"{info['totalKey']}, total size {info['totalSize']}"
            )
        sys.exit(0)
    # status: each node's own member
    rows = [["NODE", "MEMBER", "DB SIZE", "IN USE", "LEADER", "RAFT INDEX", "RAFT TERM", "RAFT APPLIED INDEX"]]
    rows[0] += ["LEARNER", "PROTOCOL", "STORAGE", "ERRORS"]
    failed = []
    for target in targets:
        member = on_node.get(target)
        answer = (
            _machined(cluster, [member["client_url"]], "status")
            if member
            else {"error": "no etcd", "code": "Unavailable"}
        )
        if "error" in answer:
            failed.append(f"{target}: {_rpc(answer)}")
            continue
        ratio = answer["db_size_in_use"] / answer["db_size"] * 100.0 if answer["db_size"] > 0 else 0.0
        rows.append(
            [
                target,
                answer["member_id"],
                _humanize_bytes(answer["db_size"]),
                f"{_humanize_bytes(answer['db_size_in_use'])} ({ratio:.2f}%)",
                answer["leader"],
                str(answer["raft_index"]),
                str(answer["raft_term"]),
                str(answer["raft_applied_index"]),
                str(answer["learner"]).lower(),
                answer["protocol"],
                answer["storage"],
                ", ".join(answer["errors"] or []),
            ]
        )
    if failed and len(failed) == len(targets):
        print(f"error: error getting status: {_errors(failed)}", file=sys.stderr)
        sys.exit(1)
    if failed:
        print(f"WARNING: {_errors(failed)}", file=sys.stderr)
    sys.stdout.write(_tabwriter(rows))
    sys.exit(0)


DIAL_ETCD = (
    'rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial tcp '
    '127.0.0.1:2379: connect: connection refused"'
)

_real_etcd()
_disaster_recovery()

if command == "shutdown":
    # talosctl shutdown --wait (cmd/talosctl/cmd/talos/shutdown.go): the action tracker's lines on stderr, as printed
    # without a terminal (`"<node>": <message>`), until the stopAllServices task; then the machine powers off.
    actor = "3f9c2d1e-7b4a-4e6f-9a21-5c8d0e4b7a19"
    for line in (
        "waiting for actor ID",
        f"actor ID: {actor}",
        "sequence: shutdown action: START",
        "phase: drain action: START",
        "task: cordonAndDrainNode action: START",
        "task: cordonAndDrainNode action: STOP",
        "phase: drain action: STOP",
        "task: stopAllServices action: START",
    ):
        print(f'"{node}": {line}', file=sys.stderr)
    with scenario() as state:
        state.setdefault("shutdown", []).append(node)
    sys.exit(0)

if command == "version":
    # talosctl's layout (cmd/talosctl/cmd/talos/version.go, pkg/machinery/version): Client, then per node Server.
    with scenario() as state:
        version = state["versions"][node]
    details = "\tSHA:         5b5b1ba2\n\tBuilt:       \n\tGo version:  go1.24.9\n\tOS/Arch:     linux/amd64\n"
    print(
        f"Client:\n\tTag:         v1.11.6\n{details}Server:\n\tNODE:        {node}\n\tTag:         {version}\n"
        f"{details}\tEnabled:     RBAC"
    )
elif arguments[4:6] == ["get", "extensions"]:
    # `talosctl get extensions`: a resource table (NODE NAMESPACE TYPE ID VERSION, then the resource's print columns
    # NAME VERSION), tabwriter-aligned; an Image Factory image carries the `schematic` extension.
    with scenario() as state:
        booted = state.get("schematics", {}).get(node)
        carried = state.get("images", {}).get(booted, []) if booted is not None else []
    rows = [["NODE", "NAMESPACE", "TYPE", "ID", "VERSION", "NAME", "VERSION"]]
    rows += [
        [node, "runtime", "ExtensionStatus", str(i), "1", name, version] for i, (name, version) in enumerate(carried)
    ]
    if booted is not None:
        rows.append([node, "runtime", "ExtensionStatus", str(len(carried)), "1", "schematic", booted])
    widths = [max(len(row[i]) for row in rows) for i in range(7)]
    for row in rows:
        print("   ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
elif command == "upgrade":
    with scenario() as state:
        together, wait = state.get("together", []), state.get("together_wait", 10)
    if node in together:
        deadline = time.monotonic() + wait
        while True:
            with scenario() as state:
                started = set(state["started"])
            if set(together) <= started:
                break
            if time.monotonic() > deadline:
                print(f"error: {node} upgraded alone, its batch {together} was not run together", file=sys.stderr)
                sys.exit(1)
            time.sleep(0.05)
    with scenario() as state:
        image = arguments[arguments.index("--image") + 1]
        if node not in state.get("rolls_back", []):
            state["versions"][node] = re.search(r":(v[^:]+)$", image).group(1)
            state.setdefault("schematics", {})[node] = re.search(r"/([0-9a-f]{64}):", image).group(1)
        if node in state.get("breaks_on_upgrade", []):
            state.setdefault("broken", []).append(node)
elif arguments[4:6] == ["etcd", "members"]:
    with scenario() as state:
        away = set(state.get("unreachable", []))
        reachable = [m for m in state["members"] if m["address"] not in away]
        leaderless = bool(state["members"]) and len(reachable) < len(state["members"]) // 2 + 1
    if leaderless:  # quorum lost: the member answers, but etcd has no leader
        print(f"error getting members: {_errors([f'{node}: {NO_LEADER}'])}", file=sys.stderr)
        sys.exit(1)
    with scenario() as state:
        rows = [["NODE", "ID", "HOSTNAME", "PEER URLS", "CLIENT URLS", "LEARNER"]]
        rows += [
            [
                node,
                m["id"],
                m["hostname"],
                f"https://{m['address']}:2380",
                f"https://{m['address']}:2379",
                "true" if m.get("learner") else "false",  # a member added, not yet promoted (Talos' learner join)
            ]
            for m in state["members"]
        ]
    widths = [max(len(row[i]) for row in rows) for i in range(6)]
    for row in rows:
        print("   ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
elif arguments[4:6] == ["etcd", "remove-member"]:
    wanted = arguments[6]
    with scenario() as state:
        known = [m for m in state["members"] if m["id"] == wanted]
        state["members"] = [m for m in state["members"] if m["id"] != wanted]
    if not known:
        print(f"error from node {node}: rpc error: code = Unknown desc = etcdserver: member not found", file=sys.stderr)
        sys.exit(1)
elif command == "upgrade-k8s":
    with scenario() as state:
        state["kubernetes"] = arguments[arguments.index("--to") + 1]
elif command == "health":
    # talosctl health writes only to stderr (cmd/talosctl/cmd/talos/health.go): `discovered nodes: [...]`, then per
    # check `waiting for <check>: ...` and its end, `OK` or `SKIP` (research 05); a check still failing at
    # --wait-timeout ends with `healthcheck error: rpc error: code = Unknown desc = context deadline exceeded`, exit 1.
    # Without `health_transcript` a failure prints one line naming the broken nodes (the upgrade's reasons quote it);
    # `node_names` (address -> Node name) lets the transcript name a Kubernetes Node as Talos does.
    with scenario() as state:
        script = state.get("health_script", [])
        scripted = bool(script)
        healthy = script.pop(0) if script else not state.get("broken")
        broken = state.get("broken", [])
        transcript = state.get("health_transcript", False)
        if state.get("etcd"):  # the members as the real etcd lists them
            state["members"] = _real_members(state["etcd"])
        control_planes = {m["address"] for m in state.get("members", [])}
        names = state.get("node_names", {})
    given = []
    for flag in ("--control-plane-nodes", "--worker-nodes"):
        if flag in arguments:
            given += arguments[arguments.index(flag) + 1].split(",")
    checks = [
        "etcd to be healthy",
        "etcd members to be consistent across nodes",
        "etcd members to be control plane nodes",
        "apid to be ready",
        "all nodes memory sizes",
        "all nodes disk sizes",
        "no diagnostics",
        "kubelet to be healthy",
        "all nodes to finish boot sequence",
        "all k8s nodes to report",
        "all control plane static pods to be running",
        "all control plane components to be ready",
        "all k8s nodes to report ready",
        "kube-proxy to report ready",
        "coredns to report ready",
        "all k8s nodes to report schedulable",
    ]
    if not healthy and not transcript:
        print(
            f"waiting for etcd members to be healthy: {', '.join(broken) or 'a member'}: context deadline exceeded",
            file=sys.stderr,
        )
        sys.exit(1)
    print("discovered nodes: [" + " ".join(f'"{address}"' for address in given) + "]", file=sys.stderr)
    failing = None
    if not healthy:
        down = broken[0] if broken else given[-1]
        failing = "etcd to be healthy" if down in control_planes else "all k8s nodes to report ready"
    for check in checks:
        print(f"waiting for {check}: ...", file=sys.stderr)
        if check == "etcd members to be control plane nodes" and not scripted and state.get("members"):
            # check.EtcdControlPlaneNodesAssertion: every member's peer URL host among the control plane nodes given
            planes = (
                arguments[arguments.index("--control-plane-nodes") + 1].split(",")
                if "--control-plane-nodes" in arguments
                else []
            )
            member_ips = [m["address"] for m in state["members"]]
            if planes and not set(member_ips) <= set(planes):
                quoted = " ".join(f'"{ip}"' for ip in member_ips)
                print(
                    f"waiting for {check}: etcd member ips [{quoted}] are not subset of "
                    f"control plane node ips [{' '.join(chr(34) + ip + chr(34) for ip in planes)}]\n"
                    f"healthcheck error: rpc error: code = DeadlineExceeded desc = context deadline exceeded",
                    file=sys.stderr,
                )
                sys.exit(1)
        if check == failing:
            if failing == "etcd to be healthy":
                print(
                    f'waiting for {check}: 1 error occurred:\n\t* {down}: service "etcd" not in expected state '
                    f'"Running": current state [Preparing] Running pre state\n',
                    file=sys.stderr,
                )
            else:
                # Talos names the Kubernetes Nodes here (K8sAllNodesReadyAssertion), not addresses
                name = names.get(down, down)
                print(f"waiting for {check}: some nodes are not ready: [{name}]", file=sys.stderr)
            print("healthcheck error: rpc error: code = Unknown desc = context deadline exceeded", file=sys.stderr)
            sys.exit(1)
        print(f"waiting for {check}: {'SKIP' if check.startswith('kube-proxy') else 'OK'}", file=sys.stderr)

# ---------------------------------------------------------------------------------- etcd snapshot / etcd status
# `talosctl etcd snapshot PATH` and `talosctl etcd status`, as talosctl (cmd/talosctl/cmd/talos/etcd.go) does them.
# Scenario keys:
#   etcd_snapshot   {"fixture": a genuine snapshot (tests/etcd_tool.py makes one with an embedded etcd),
#                    "info": {etcd_hash, revision, total_keys, total_size} (the tool's verify report),
#                    "damage": null | "flip" | "cut"}
#                   The node streams the fixture: talosctl writes PATH.part (0600), checks only that the size is
#                   512*k+32 (the digest is there), renames it to PATH and prints the two lines below. "flip" changes
#                   one byte of the database in transit (talosctl does not check the digest: it keeps the file and
#                   exits 0), "cut" ends the stream early (talosctl refuses the size, removes PATH.part, exits 1).
#   etcd_status     address -> fields of EtcdMemberStatus (member_id, db_size, db_size_in_use, leader, raft_index,
#                   raft_term, raft_applied_index, learner, protocol, storage, errors); defaults below (a node of
#                   `members` answers with its member's id). An address in `broken` or `unreachable` does not answer:
#                   a WARNING on stderr and no row, as talosctl prints a node's error.
# A real cluster adds what a fixture cannot: a snapshot of gigabytes taking minutes, a leader change mid-stream.
import hashlib  # noqa: E402  (this block stays self-contained)
import os  # noqa: E402


def _member_id(address: str) -> str:
    return hashlib.sha256(address.encode()).hexdigest()[:16]


if command == "etcd" and arguments[5:6] == ["snapshot"]:
    targets = node.split(",")
    if len(targets) > 1:
        print('error: command "etcd snapshot" is not supported with multiple nodes', file=sys.stderr)
        sys.exit(1)
    with scenario() as state:
        broken, setup = node in state.get("broken", []), state.get("etcd_snapshot") or {}
    if broken:
        print(
            f'error: error reading file: rpc error: code = Unavailable desc = connection error: desc = "transport: '
            f'Error while dialing: dial tcp {node}:50000: connect: connection refused"',
            file=sys.stderr,
        )
        sys.exit(1)
    with open(setup["fixture"], "rb") as source:
        stream = bytearray(source.read())
    damage = setup.get("damage")
    if damage == "flip":
        stream[len(stream) // 2] ^= 0x01
    elif damage == "cut":
        stream = stream[: len(stream) // 2 + 100]
    db_path = arguments[6]
    part_path = db_path + ".part"
    descriptor = os.open(part_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as destination:
        destination.write(stream)
    if len(stream) % 512 != 32:
        os.remove(part_path)
        print(f"error: sha256 checksum not found (size {len(stream)})", file=sys.stderr)
        sys.exit(1)
    os.rename(part_path, db_path)
    print(f'etcd snapshot saved to "{db_path}" ({len(stream)} bytes)')
    info = setup.get("info")
    if info:
        print(
            f"snapshot info: hash {info['etcd_hash']}, revision {info['revision']}, total keys "
            f"{info['total_keys']}, total size {info['total_size']}"
        )
elif command == "etcd" and arguments[5:6] == ["status"]:
    targets = node.split(",")
    with scenario() as state:
        broken, statuses = state.get("broken", []) + state.get("unreachable", []), state.get("etcd_status", {})
        ids = {m["address"]: m["id"] for m in state.get("members", [])}  # a member's row carries its own id
    leader = statuses.get(targets[0], {}).get("member_id") or ids.get(targets[0]) or _member_id(targets[0])
    rows = [
        [
            "NODE",
            "MEMBER",
            "DB SIZE",
            "IN USE",
            "LEADER",
            "RAFT INDEX",
            "RAFT TERM",
            "RAFT APPLIED INDEX",
            "LEARNER",
            "PROTOCOL",
            "STORAGE",
            "ERRORS",
        ]
    ]
    down = [target for target in targets if target in broken]
    for target in targets:
        if target in down:
            continue
        member = {
            "member_id": ids.get(target) or _member_id(target),
            "db_size": 17_219_584,
            "db_size_in_use": 4_493_312,
            "leader": leader,
            "raft_index": 53391,
            "raft_term": 4,
            "raft_applied_index": 53391,
            "learner": False,
            "protocol": "3.6.5",
            "storage": "3.6.0",
            "errors": [],
            **statuses.get(target, {}),
        }
        ratio = member["db_size_in_use"] / member["db_size"] * 100.0 if member["db_size"] > 0 else 0.0
        rows.append(
            [
                target,
                member["member_id"],
                _humanize_bytes(member["db_size"]),
                f"{_humanize_bytes(member['db_size_in_use'])} ({ratio:.2f}%)",
                member["leader"],
                str(member["raft_index"]),
                str(member["raft_term"]),
                str(member["raft_applied_index"]),
                str(member["learner"]).lower(),
                member["protocol"],
                member["storage"],
                ", ".join(member["errors"]),
            ]
        )
    errors = "".join(
        f'\t* {target}: rpc error: code = Unavailable desc = connection error: desc = "transport: '
        f'Error while dialing: dial tcp {target}:50000: connect: connection refused"\n'
        for target in down
    )
    summary = f"{len(down)} error{'s' if len(down) > 1 else ''} occurred:\n{errors}"
    if len(down) == len(targets):
        print(f"error: error getting status: {summary}", file=sys.stderr)
        sys.exit(1)
    if down:
        print(f"WARNING: {summary}", file=sys.stderr)
    sys.stdout.write(_tabwriter(rows))

# ------------------------------------------------------------------------------------- services / logs (check)
# `talosctl services` and `talosctl logs SERVICE --tail N` of several nodes at once (--nodes a,b,c), as talosctl
# 1.11-1.13 prints them (cmd/talosctl/cmd/talos/service.go, logs.go; research 05). Scenario keys:
#   services   address -> [[id, state, health, last event], ...]; default: apid, containerd, cri, etcd (control
#              planes: the addresses in `members`), kubelet, machined, trustd, udevd, Running and healthy
#   logs       address -> service -> [the raw lines the service wrote]; `--tail N` keeps each node's last N
# A node in `unreachable` does not answer: `services` prints the others' rows and a WARNING with go-multierror's
# `\t* <node>: <error>` lines on stderr and exits 0 (1.11-1.13: a partial failure is a warning), `error listing
# services: ...` and exit 1 when no node answered; `logs` prints the others' lines, then `ERROR: <error>` per failed
# node on stderr and exits 1. A real cluster adds: logs that grow while read, `-f`, apid's proxy latency.
DIAL = (
    'rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial tcp '
    '{}:50000: connect: no route to host"'
)


def _default_services(address: str, control_planes: set[str]) -> list[list[str]]:
    rows = [
        ["apid", "Running", "OK", "Health check successful"],
        ["containerd", "Running", "OK", "Health check successful"],
        ["cri", "Running", "OK", "Health check successful"],
        ["etcd", "Running", "OK", "Health check successful"],
        ["kubelet", "Running", "OK", "Health check successful"],
        ["machined", "Running", "?", "Service started as goroutine"],
        ["trustd", "Running", "OK", "Health check successful"],
        ["udevd", "Running", "OK", "Health check successful"],
    ]
    return [row for row in rows if row[0] != "etcd" or address in control_planes]


if command in ("services", "service") and len(arguments) == 5:
    targets = node.split(",")
    with scenario() as state:
        down = [t for t in targets if t in state.get("unreachable", [])]
        listing = state.get("services", {})
        control_planes = {m["address"] for m in state.get("members", [])}
    rows = [["NODE", "SERVICE", "STATE", "HEALTH", "LAST CHANGE", "LAST EVENT"]]
    for target in targets:
        if target not in down:
            for service, state_name, health, event in listing.get(target) or _default_services(target, control_planes):
                rows.append([target, service, state_name, health, "19m27s ago", event])
    errors = "".join(f"\t* {target}: {DIAL.format(target)}\n" for target in down)
    summary = f"{len(down)} error{'s' if len(down) > 1 else ''} occurred:\n{errors}"
    if down and len(down) == len(targets):
        print(f"error listing services: {summary}", file=sys.stderr)
        sys.exit(1)
    if down:
        print(f"WARNING: {summary}", file=sys.stderr)
    sys.stdout.write(_tabwriter(rows))
elif command == "logs":
    targets, service = node.split(","), arguments[5]
    tail = int(arguments[arguments.index("--tail") + 1]) if "--tail" in arguments else -1
    with scenario() as state:
        down = [t for t in targets if t in state.get("unreachable", [])]
        written = state.get("logs", {})
    for target in targets:
        if target in down:
            continue
        lines = written.get(target, {}).get(service, [])
        for line in lines[-tail:] if tail >= 0 else lines:
            print(f"{target}: {line}")
    for target in down:
        print(f"ERROR: {DIAL.format(target)}", file=sys.stderr)
    if down:
        sys.exit(1)
