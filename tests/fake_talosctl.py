"""A fake `talosctl` for the upgrade tests, driven by a scenario file (JSON), touching nothing.

    python fake_talosctl.py SCENARIO --talosconfig FILE --nodes ADDRESS COMMAND ...

Tests write a two-line wrapper named `talosctl` into their tmp_path that execs this file with their scenario.
The scenario holds the state it answers from and records every call (under a lock: batches call it in parallel):

    versions            address -> running Talos version (`version` answers it, `upgrade` sets it from --image)
    broken              addresses that make `health` fail (a node that is down)
    breaks_on_upgrade   addresses that join `broken` when upgraded (an upgrade that leaves the node unhealthy)
    health_script       answers (true/false) for the next `health` calls, before the rules above apply
    fail                command -> addresses whose call exits 1 ("*" for any)
    hang                command -> addresses whose call never returns ("*" for any): a child holds the output
                        pipes, as a wrapper would, so only killing the process group ends it
    together            addresses whose `upgrade` calls must overlap in time: each waits (together_wait
                        seconds, default 10) until all have started, and fails if they do not (a batch run one
                        by one)
    calls               appended: the arguments of every call
    kubernetes          set by upgrade-k8s --to
"""
from __future__ import annotations

import contextlib
import fcntl
import json
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
    with scenario() as state:
        addresses = state.get(table, {}).get(command, [])
    return node in addresses or "*" in addresses


with scenario() as state:
    state["calls"].append(arguments)
    if command == "upgrade":
        state.setdefault("started", []).append(node)

if listed("hang"):
    with open(scenario_path + ".hung", "a") as hung:
        child = subprocess.Popen(["sleep", "3600"])
        hung.write(f"{child.pid}\n")
    child.wait()
    sys.exit(0)
if listed("fail"):
    print(f"error: {command} on {node} failed: rpc error: code = Unavailable", file=sys.stderr)
    sys.exit(1)

if command == "version":
    with scenario() as state:
        version = state["versions"][node]
    print(f"Client:\n\tTag: v1.11.6\nServer:\n\tNODE: {node}\n\tTag: {version}")
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
        state["versions"][node] = re.search(r":(v[^:]+)$", arguments[arguments.index("--image") + 1]).group(1)
        if node in state.get("breaks_on_upgrade", []):
            state.setdefault("broken", []).append(node)
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
