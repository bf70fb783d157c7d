#!/usr/bin/env python
"""Synth time of the whole app against the number of nodes (median of N runs per size).

    pipenv run python benchmarks/synth_scale.py [--sizes 5,50,200] [--runs 3]

Each size is a site with 3 control planes and the rest workers spread over two hypervisors; the time covers
build_app() plus app.synth() (aspects, all six rules, validations, writing JSON).
"""
from __future__ import annotations

import argparse
import copy
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
if (ROOT / "node_modules/.bin/node").exists():
    os.environ.setdefault("JSII_NODE", str(ROOT / "node_modules/.bin/node"))

from tests import support  # noqa: E402
from terravixens.stacks import build_app  # noqa: E402


def site_with(nodes: int):
    data = support.example_data()
    cluster = data["clusters"]["prod"]
    template = copy.deepcopy(cluster["workers"]["wk-a"])
    cluster["workers"] = {}
    for index in range(nodes - len(cluster["control_planes"])):
        worker = copy.deepcopy(template)
        worker.update(vm_id=2000 + index, hypervisor=("pve1", "pve2")[index % 2])
        worker["networks"] = {"vlans": {111: {"address": f"10.11.{2 + index // 250}.{1 + index % 250}/16"}}}
        cluster["workers"][f"wk-{index:04d}"] = worker
    for plane in cluster["control_planes"].values():  # one subnet per VLAN: the workers' /16
        plane["networks"]["vlans"][111]["address"] = plane["networks"]["vlans"][111]["address"].replace("/24", "/16")
    cluster["cilium"]["pools"] = {"services": ["10.99.0.0/24"]}
    return support.site_from(data)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="5,50,200")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"{'nodes':>6} {'median s':>9} {'ms/node':>8}")
    for size in (int(s) for s in args.sizes.split(",")):
        site = site_with(size)
        times = []
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory() as outdir:
                started = time.perf_counter()
                build_app(site, outdir).synth()
                times.append(time.perf_counter() - started)
        median = statistics.median(times)
        print(f"{size:>6} {median:>9.2f} {1000 * median / size:>8.1f}")


if __name__ == "__main__":
    main()
