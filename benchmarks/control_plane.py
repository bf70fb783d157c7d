"""What the real control plane of the tests costs (ADR 0058): its start-up and stop, and the cold build of its tools.

    .venv/bin/python benchmarks/control_plane.py [--runs 5] [--cold]

Each run starts tests/control_plane.py's ControlPlane (three etcd members, kube-apiserver, the CRDs applied by the
real kubectl), as the tests' session fixture does, and stops it; the median and the slowest of each phase are
printed, with the load average before and after (the machine is shared: a figure without its load says nothing).
--cold builds kube-apiserver, kubectl, etcd, etcdutl and machined once more into a temporary folder with an empty
GOCACHE (the module cache stays: downloads are not counted), one after the other, and prints each build's wall time
and CPU time (user + system of the go command and every compiler it ran). With --primed the empty cache first gets
what `make tools` already built before these tools existed and shares code with them (tools/etcd-snapshot: etcd
v3.6.16; tools/k8s-decode: k8s.io/api v0.34.2), so the figure is what a cold `make setup-test` grows by.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests import control_plane  # noqa: E402

PRIMERS = (  # what `make tools` built before, sharing modules with these: folder, package, output
    ("tools/etcd-snapshot", ".", "etcd-snapshot"),
    ("tools/k8s-decode", ".", "k8s-decode"),
)


def kube_gcflags() -> list[str]:
    """The compiler flags the Makefile builds kube-apiserver and kubectl with (KUBE_GCFLAGS), read from it."""
    found = re.search(r"^KUBE_GCFLAGS := (.*)$", (ROOT / "Makefile").read_text(), re.M)
    if not found:
        raise SystemExit("KUBE_GCFLAGS is not in the Makefile")
    return shlex.split(found.group(1))


KUBE_GCFLAGS = kube_gcflags()
BUILDS = (  # what `make tools` builds for the control plane: folder, package, output, compiler flags
    ("tools/kube", "k8s.io/kubernetes/cmd/kube-apiserver", "kube-apiserver", KUBE_GCFLAGS),
    ("tools/kube", "k8s.io/kubernetes/cmd/kubectl", "kubectl", KUBE_GCFLAGS),
    ("tools/etcd", "./etcd", "etcd", []),
    ("tools/etcd", "go.etcd.io/etcd/etcdutl/v3", "etcdutl", []),
    ("tools/etcd", "./machined", "machined", []),
)


def load() -> str:
    return " ".join(f"{value:.1f}" for value in os.getloadavg())


def cold_builds(primed: bool) -> None:
    total_cpu = 0.0
    with tempfile.TemporaryDirectory(prefix="tv-gocache-") as cache, tempfile.TemporaryDirectory() as out:
        for folder, package, name in PRIMERS if primed else ():
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run(
                ["go", "build", "-mod=readonly", "-trimpath", "-buildvcs=false", "-o", f"{out}/{name}", package],
                cwd=ROOT / folder,
                env={**os.environ, "GOCACHE": cache, "GOTOOLCHAIN": "local"},
                check=True,
                capture_output=True,
            )
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            print(f"primer {name:19} {cpu:7.1f} s CPU (not counted)")
        for folder, package, name, flags in BUILDS:  # one cache for all: kubectl reuses what kube-apiserver compiled
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.perf_counter()
            build = ["go", "build", "-mod=readonly", "-trimpath", "-buildvcs=false", *flags, "-o", f"{out}/{name}"]
            subprocess.run(
                [*build, package],
                cwd=ROOT / folder,
                env={**os.environ, "GOCACHE": cache, "GOTOOLCHAIN": "local", "GOGC": "400"},  # as the Makefile
                check=True,
                capture_output=True,
            )
            wall = time.perf_counter() - started
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            total_cpu += cpu
            print(f"cold build {name:15} {wall:7.1f} s wall {cpu:7.1f} s CPU")
    what = "on a cache primed with the tools that share modules" if primed else "from an empty cache"
    print(f"cold builds in all, {what}: {total_cpu / 60:.1f} min CPU (load average now {load()})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--cold", action="store_true", help="also time the cold builds (many minutes of CPU)")
    parser.add_argument("--primed", action="store_true", help="--cold on a cache primed as make tools primes it")
    arguments = parser.parse_args()
    print(f"machine: {os.cpu_count()} cores, {platform.system()} {platform.machine()}; load average {load()}")
    phases: dict[str, list[float]] = {}
    for _ in range(arguments.runs):
        folder = control_plane.new_folder("tv-benchmark-")
        plane = control_plane.ControlPlane(folder)
        try:
            plane.start()
        finally:
            stopping = time.perf_counter()
            plane.close()
            stopped = time.perf_counter() - stopping
            shutil.rmtree(folder, ignore_errors=True)  # its keys and etcd data: nothing of a run stays behind
        for phase, seconds in [*plane.phases.items(), ("start-up", plane.started_in), ("stop", stopped)]:
            phases.setdefault(phase, []).append(seconds)
    if arguments.runs:
        print(f"{'phase':16} {'median':>8} {'slowest':>8}   ({arguments.runs} runs)")
        for phase, seconds in phases.items():
            print(f"{phase:16} {statistics.median(seconds):7.1f}s {max(seconds):7.1f}s")
        print(f"load average after: {load()}; left running: {control_plane.leftovers() or 'nothing'}")
    if arguments.cold:
        cold_builds(arguments.primed)


if __name__ == "__main__":
    main()
