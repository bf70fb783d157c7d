#!/usr/bin/env python3
"""The node agent's no-change run (issue 19): a spec of N users and M packages, converged once on a throwaway root
with stand-ins for the managers (tests/agent_support.py), then timed over R runs that find nothing to do.

    python3 benchmarks/agent_converge.py [--users 20] [--packages 50] [--services 5] [--runs 5]

Each run is what a timer start costs a converged node after its fetch: a fresh interpreter (`python3 -m
terravixens.agent converge`), every section read from the root, one dpkg-query for all packages, two systemctl
reads per service and per run unit. Prints the machine, the load, and min / median / max seconds; exit 1 when a
no-change run changed something. The stand-ins are Python scripts (one interpreter start per manager call, ~20-40
ms each): a real dpkg-query / systemctl answer in a few ms, so on a node the figure is lower.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.agent_support import KEY, agent, calls, mutations, node_root, spec_document  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--packages", type=int, default=50)
    parser.add_argument("--services", type=int, default=5)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    users = {
        f"user{i:02d}": {"sudo": i % 2 == 0, "shell": "/bin/bash", "groups": ["adm"], "ssh_authorized_keys": [KEY]}
        for i in range(args.users)
    }
    packages = [f"pkg{i:02d}" for i in range(args.packages)]
    document = spec_document(users=users, packages=packages, enable=packages[: args.services])
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cpu(s), load {os.getloadavg()[0]:.2f}, Python "
        f"{platform.python_version()}"
    )
    print(f"spec: {args.users} users, {args.packages} packages, {args.services} services enabled (stand-ins)")
    with tempfile.TemporaryDirectory() as folder:
        root, tools = node_root(Path(folder))
        spec = Path(folder) / "spec.json"
        spec.write_text(json.dumps(document))
        started = time.monotonic()
        first = agent(root, tools, "converge", "--spec", str(spec), "--json", timeout=600)
        if first.returncode != 0:
            print(f"first run failed (exit {first.returncode}): {first.stderr.strip()[-300:]}")
            return 1
        print(f"first run: {json.loads(first.stdout)['changed']} item(s) changed in {time.monotonic() - started:.2f} s")
        times, before = [], len(calls(root))
        for _ in range(args.runs):
            started = time.monotonic()
            ran = agent(root, tools, "converge", "--spec", str(spec), "--json", timeout=600)
            times.append(time.monotonic() - started)
            if ran.returncode != 0 or json.loads(ran.stdout)["changed"] != 0:
                print(f"a no-change run changed something: {ran.stdout[-300:]}")
                return 1
        reads = (len(calls(root)) - before) // args.runs
        print(
            f"no-change run ({args.runs} runs): min {min(times):.2f} s, median {statistics.median(times):.2f} s, "
            f"max {max(times):.2f} s; {reads} manager reads per run, {len(mutations(root, before))} changes"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
