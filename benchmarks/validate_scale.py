#!/usr/bin/env python
"""`terravixens validate` of a large site: median of N runs, in-process and as a whole process.

    pipenv run python benchmarks/validate_scale.py [--nodes 1000] [--runs 7]

The site is the example site grown to NODES nodes (3 control planes, the rest workers over four hypervisors, every
node with a maintenance IP, a management VLAN address with a gateway and labels), valid in every rule. In-process
times split the load into its three steps (read and strict YAML, the model, the whole-site rules); the process
time is `python -m terravixens.cli validate SITE`, interpreter start and imports included. Target: under 1 s.

Each figure is the median wall time and the median CPU time (user + system, of this process or of the child):
on a shared machine the wall time also counts waiting for a core, so the load average is printed too. The
address-parsing caches and the rules' node walk are cleared before every in-process run.
"""

from __future__ import annotations

import argparse
import copy
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from terravixens.config import model as site_model  # noqa: E402
from terravixens.config import site_rules  # noqa: E402
from terravixens.config.loader import SITE_LIMIT, load_site  # noqa: E402
from terravixens.config.model import Site  # noqa: E402
from terravixens.inputs import load_yaml, read_text  # noqa: E402

HYPERVISORS = ("pve1", "pve2", "pve3", "pve4")


def site_text(nodes: int) -> str:
    data = yaml.safe_load((ROOT / "sites" / "example.yaml").read_text())
    for name in HYPERVISORS:
        data["hypervisors"].setdefault(name, copy.deepcopy(data["hypervisors"]["pve2"])).update(node_name=name)
    cluster = data["clusters"]["prod"]
    cluster["endpoint_vip"] = "10.11.0.10"
    cluster["cilium"]["pools"] = {"services": ["10.99.0.0/24"]}
    template = cluster["workers"]["wk-a"]
    members = {
        **{name: (True, index) for index, name in enumerate(("cp-a", "cp-b", "cp-c"))},
        **{f"wk-{index:04d}": (False, index + 3) for index in range(nodes - 3)},
    }
    cluster["control_planes"], cluster["workers"] = {}, {}
    for name, (control_plane, index) in members.items():
        node = copy.deepcopy(template)
        high, low = divmod(index + 20, 250)
        node.update(vm_id=2000 + index, hypervisor=HYPERVISORS[index % len(HYPERVISORS)])
        node["networks"] = {
            "maintenance_ip": f"10.0.{high}.{low + 1}",
            "vlans": {111: {"address": f"10.11.{high}.{low + 1}/16", "gateway": "10.11.0.1"}},
        }
        (cluster["control_planes"] if control_plane else cluster["workers"])[name] = node
    return yaml.safe_dump(data, sort_keys=False)


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def median_seconds(action, runs: int, who: int = resource.RUSAGE_SELF) -> tuple[float, float]:
    """Median wall and CPU seconds of `action`, caches cleared before each run."""
    walls, cpus = [], []
    for _ in range(runs):
        site_model.parse_interface.cache_clear()
        site_model.parse_address.cache_clear()
        site_rules.walk.machines.cache_clear()
        cpu, started = _cpu(who), time.perf_counter()
        action()
        walls.append(time.perf_counter() - started)
        cpus.append(_cpu(who) - cpu)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        path = Path(workdir) / "site.yaml"
        path.write_text(site_text(args.nodes))
        site = load_site(path)  # valid, and warms imports up
        assert sum(len(c.nodes()) for c in site.clusters.values()) == args.nodes
        text = read_text(path, limit=SITE_LIMIT, what="site file")
        data, _ = load_yaml(text, path)
        model = Site.model_validate(data)
        steps = {
            "read + strict YAML": median_seconds(
                lambda: load_yaml(read_text(path, limit=SITE_LIMIT, what="site"), path), args.runs
            ),
            "model (pydantic)": median_seconds(lambda: Site.model_validate(data), args.runs),
            "whole-site rules": median_seconds(lambda: site_rules.check(model), args.runs),
            "load_site (all three)": median_seconds(lambda: load_site(path), args.runs),
        }
        command = [sys.executable, "-m", "terravixens.cli", "validate", str(path)]

        def process() -> None:
            result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
            assert result.returncode == 0, result.stderr

        steps["whole process (validate)"] = median_seconds(process, args.runs, resource.RUSAGE_CHILDREN)
        print(
            f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"{platform.system()} {platform.release()}; load average {os.getloadavg()[0]:.1f}"
        )
        print(f"site: {args.nodes} nodes, {path.stat().st_size:,} bytes; median of {args.runs} runs")
        print(f"{'':>26} {'wall ms':>9} {'cpu ms':>9}")
        for label, (wall, cpu) in steps.items():
            print(f"{label:>26} {wall * 1000:9.1f} {cpu * 1000:9.1f}")
        wall, cpu = steps["whole process (validate)"]
        print(
            f"target < 1 s for the whole process: {'met' if wall < 1 else 'missed'} (wall), "
            f"{'met' if cpu < 1 else 'missed'} (cpu)"
        )


if __name__ == "__main__":
    main()
