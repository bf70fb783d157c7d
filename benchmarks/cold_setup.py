#!/usr/bin/env python3
"""Fresh-machine set-up time: `make` targets in a fresh clone with every cache empty. Standard library only.

    python3 benchmarks/cold_setup.py [--rev HEAD] [--targets synth,test] [--warm N] [--keep]

Clones --rev of this repository into a temporary folder and runs each target in turn with empty, private caches
(npm, pip, pipenv, Go modules and build, the terravixens cache, HOME — so pipenv is installed afresh too), so
nothing of this machine's caches is used or disturbed. The first target runs cold; each later one finds what the
earlier ones set up (e.g. `test` after `synth`). Prints per target the wall time, the CPU seconds of everything it
ran, its exit code and the per-step times (scripts/step.py's `[step] done (N s)` lines, the providers' own lines);
the machine and the load average come first, because on a shared machine the wall time depends on them. --warm N
then runs `make synth` N more times in the same clone (everything set up: the warm synth of the example site).
Needs the network to npm, PyPI and the Go module proxy.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.paths import scrubbed, shown  # noqa: E402

# What each set-up step printed at its end (scripts/step.py), and the providers' own timed lines.
STEP_LINE = re.compile(r"^(\[[\w.-]+\] (done|failed with exit \d+) \(|(\[[\w.-]+\] )?\[providers\] .*\(\d)")


def machine() -> str:
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        "unknown CPU",
    )
    load = "/".join(f"{value:.1f}" for value in os.getloadavg())
    return f"machine: {platform.machine()}, {model}, {os.cpu_count()} cores; load average {load} at start"


def private_caches(base: Path) -> dict[str, str]:
    caches = {
        "HOME": base / "home",
        "TERRAVIXENS_CACHE": base / "terravixens",
        "GOMODCACHE": base / "gomod",
        "GOCACHE": base / "gocache",
        "npm_config_cache": base / "npm",
        "PIP_CACHE_DIR": base / "pip",
        "PIPENV_CACHE_DIR": base / "pipenv",
        "XDG_CACHE_HOME": base / "xdg",
    }
    for path in caches.values():
        path.mkdir(parents=True, exist_ok=True)
    return {name: str(path) for name, path in caches.items()}


def remove(base: Path) -> None:
    """The Go module cache is read-only: make it writable first."""
    for folder, dirs, _ in os.walk(base):
        for name in dirs:
            os.chmod(os.path.join(folder, name), 0o755)
    shutil.rmtree(base, ignore_errors=True)


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rev", default="HEAD", help="revision of this repository to clone (default HEAD)")
    parser.add_argument("--targets", default="synth,test", help="make targets, run in this order")
    parser.add_argument("--keep", action="store_true", help="keep the clone and its caches (printed)")
    parser.add_argument("--warm", type=int, default=0, help="then N warm `make synth` runs in the same clone")
    args = parser.parse_args()
    revision = subprocess.run(
        ["git", "rev-parse", "--short", args.rev], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    print(machine(), flush=True)
    base = Path(tempfile.mkdtemp(prefix="tv-cold-"))
    print(
        f"revision {revision}; fresh clone, every cache empty; targets in order: {args.targets}; scratch folder "
        f"(clone, caches, HOME) $SCRATCH = {shown(base)}",
        flush=True,
    )
    clone = base / "repo"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    subprocess.run(["git", "checkout", "--quiet", revision], cwd=clone, check=True)
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("TF_CLI_CONFIG_FILE", "TERRAVIXENS_PROVIDERS", "MAKEFLAGS", "VIRTUAL_ENV", "PIPENV_ACTIVE")
    }
    env.update(private_caches(base / "caches"))
    failed = 0
    targets = args.targets.split(",")
    for number, target in enumerate(targets + ["synth"] * args.warm):
        warm = number >= len(targets)
        log = base / f"make-{target}-{number}.log"
        cpu, started = children_cpu(), time.monotonic()
        with log.open("w") as out:
            code = subprocess.run(
                ["make", target], cwd=clone, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            ).returncode
        wall, used = time.monotonic() - started, children_cpu() - cpu
        print(
            f"make {target}{' (warm)' if warm else ''}: {wall:.1f} s wall ({int(wall // 60)} min {wall % 60:02.0f} s), "
            f"{used:.0f} s CPU, exit {code}",
            flush=True,
        )
        for line in log.read_text(errors="replace").splitlines():
            if STEP_LINE.match(line) or " packages in " in line or re.search(r"\d+ passed", line):
                print(f"    {scrubbed(line.strip(), SCRATCH=base)}", flush=True)
        failed |= code != 0
    if args.keep:
        print(f"kept: {shown(base)}")
    else:
        remove(base)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
