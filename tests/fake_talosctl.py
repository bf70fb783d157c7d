"""A fake `talosctl` for the upgrade tests, driven by a scenario file (JSON), touching nothing.

    python fake_talosctl.py SCENARIO --talosconfig FILE --nodes ADDRESS COMMAND ...

Tests write a two-line wrapper named `talosctl` into their tmp_path that execs this file with their scenario.
The scenario holds the state it answers from and records every call (under a lock: batches call it in parallel):

    versions            address -> running Talos version (`version` answers it, `upgrade` sets it from --image);
                        any text: talosctl prints the Tag it gets from the node
    schematics          address -> schematic id of the image the node booted (`get extensions` lists it as the
                        Image Factory's `schematic` extension; `upgrade` sets it from --image; absent: no such row,
                        as on a node not booted from a factory image)
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
    members             the etcd members: [{"id": 16 hex digits, "hostname", "address"}]; `etcd members` through
                        a reachable node prints them as talosctl does (NODE ID HOSTNAME PEER URLS CLIENT URLS
                        LEARNER), `etcd remove-member ID` removes one
    calls               appended: the arguments of every call (tests may append their own entries, e.g. the
                        terraform calls, to see the order of everything)
    kubernetes          set by upgrade-k8s --to
"""
from __future__ import annotations

import contextlib
import fcntl
import json
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
        with open(scenario_path, "w") as target:
            json.dump(state, target)


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
    print(f"{prefix} {node}: rpc error: code = Unavailable desc = connection error: desc = \"transport: Error while "
          f"dialing: dial tcp {node}:50000: connect: no route to host\"", file=sys.stderr)
    sys.exit(1)

if command == "version":
    # talosctl's layout (cmd/talosctl/cmd/talos/version.go, pkg/machinery/version): Client, then per node Server.
    with scenario() as state:
        version = state["versions"][node]
    details = "\tSHA:         5b5b1ba2\n\tBuilt:       \n\tGo version:  go1.24.9\n\tOS/Arch:     linux/amd64\n"
    print(f"Client:\n\tTag:         v1.11.6\n{details}Server:\n\tNODE:        {node}\n\tTag:         {version}\n"
          f"{details}\tEnabled:     RBAC")
elif arguments[4:6] == ["get", "extensions"]:
    # `talosctl get extensions`: a resource table (NODE NAMESPACE TYPE ID VERSION, then the resource's print columns
    # NAME VERSION), tabwriter-aligned; an Image Factory image carries the `schematic` extension.
    with scenario() as state:
        booted = state.get("schematics", {}).get(node)
    rows = [["NODE", "NAMESPACE", "TYPE", "ID", "VERSION", "NAME", "VERSION"]]
    if booted is not None:
        rows.append([node, "runtime", "ExtensionStatus", "0", "1", "schematic", booted])
    widths = [max(len(row[i]) for row in rows) for i in range(7)]
    for row in rows:
        print("   ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
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
        rows = [["NODE", "ID", "HOSTNAME", "PEER URLS", "CLIENT URLS", "LEARNER"]]
        rows += [[node, m["id"], m["hostname"], f"https://{m['address']}:2380", f"https://{m['address']}:2379", "false"]
                 for m in state["members"]]
    widths = [max(len(row[i]) for row in rows) for i in range(6)]
    for row in rows:
        print("   ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
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
    with scenario() as state:
        script = state.get("health_script", [])
        healthy = script.pop(0) if script else not state.get("broken")
        broken = state.get("broken", [])
    if not healthy:
        print(f"waiting for etcd members to be healthy: {', '.join(broken) or 'a member'}: context deadline "
              f"exceeded", file=sys.stderr)
        sys.exit(1)
    print("waiting for all nodes to finish boot sequence: OK")
