#!/usr/bin/env python
"""Whole-process synth time and peak memory against the number of nodes, as a ratio to the empty-app floor.

    pipenv run python benchmarks/synth_scale.py [--sizes 5,103,303,1000] [--runs 5] [--phases]

Every measurement is a fresh process of the same interpreter (this venv), with the flags cdktf.json's "app" gives
it (`python -O main.py`: -O), timed from spawn to exit:
- the floor: an empty cdktf app (import cdktf, one empty stack, app.synth());
- each size: what `cdktf synth` runs (main.py) for a site file of 3 control planes and N-3 workers
  (tests/scale.py): import, load and validate the site file, build every stack (rules on), synth, write JSON.
Reported per size: median wall (and min-max) over --runs, the ratio of the median to the floor's median, the median
CPU seconds of the process tree (Python and its jsii Node.js process: steadier than wall on a shared machine), the
peak resident memory (ru_maxrss from wait4: the largest single process of the tree — Python, or one of the two
node processes of its jsii runtime — not their sum), and the cost per node between consecutive sizes (ms/node).
--phases adds, per size, the median seconds of each phase measured inside the process (import, site, build,
synth) and what is left (interpreter start and exit, the jsii runtime's shutdown).
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

from benchmarks.paths import shown  # noqa: E402

# The child programs: one fresh interpreter per run. Each prints its phase times as JSON on its last line.
FLOOR = """
import json, sys, time
started = time.perf_counter()
from cdktf import App, TerraformStack
imported = time.perf_counter()
import_cpu = time.process_time()
app = App(outdir=sys.argv[1])
TerraformStack(app, "empty")
built = time.perf_counter()
app.synth()
done = time.perf_counter()
print(json.dumps({"import": imported - started, "site": 0.0, "build": built - imported, "synth": done - built,
                  "import_cpu": import_cpu}))
"""

SITE = """
import json, sys, time
started = time.perf_counter()
import terravixens.stacks
from terravixens.config.loader import load_site
imported = time.perf_counter()
import_cpu = time.process_time()
site = load_site(sys.argv[2])
loaded = time.perf_counter()
app = terravixens.stacks.build_app(site, sys.argv[1])
built = time.perf_counter()
app.synth()
done = time.perf_counter()
print(json.dumps({"import": imported - started, "site": loaded - imported, "build": built - loaded,
                  "synth": done - built, "import_cpu": import_cpu}))
"""

PHASES = ("import", "site", "build", "synth")
IMPORT_CPU = "import_cpu"  # CPU seconds of the Python process up to the end of the imports (startup included)


def app_flags() -> list[str]:
    """The interpreter flags of cdktf.json's "app" (e.g. `pipenv run python -O main.py` -> ["-O"])."""
    words = json.loads((ROOT / "cdktf.json").read_text())["app"].split()
    start = next((index for index, word in enumerate(words) if Path(word).name.startswith("python")), None)
    if start is None:
        return []
    return [word for word in words[start + 1 :] if word.startswith("-")]


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    node = ROOT / "node_modules" / ".bin" / "node"
    if node.exists():
        env.setdefault("JSII_NODE", str(node))  # the project's Node.js, as `make` uses it
    env.setdefault("NODE_OPTIONS", "--disable-warning=DEP0044")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def run_child(program: str, site_file: Path | None) -> dict:
    """Wall seconds, peak RSS (MiB) and phase seconds of one fresh process, reaped with wait4 so that its own
    rusage is read (ru_maxrss then covers the child and its waited-for jsii node processes, as a maximum)."""
    with tempfile.TemporaryDirectory(prefix="tv-bench-") as outdir:
        args = [sys.executable, *app_flags(), "-c", program, outdir] + ([str(site_file)] if site_file else [])
        errors = Path(outdir, "stderr.txt")
        read_fd, write_fd = os.pipe()
        started = time.perf_counter()
        pid = os.posix_spawn(
            sys.executable,
            args,
            child_env(),
            file_actions=[
                (os.POSIX_SPAWN_DUP2, write_fd, 1),
                (os.POSIX_SPAWN_CLOSE, read_fd),
                (os.POSIX_SPAWN_OPEN, 2, str(errors), os.O_WRONLY | os.O_CREAT, 0o600),
            ],
        )
        os.close(write_fd)
        with os.fdopen(read_fd) as pipe:
            output = pipe.read()
        _, status, usage = os.wait4(pid, 0)
        wall = time.perf_counter() - started
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            raise SystemExit(f"benchmark child failed with exit code {code}:\n{errors.read_text()[-3000:]}")
    return {
        "wall": wall,
        "cpu": usage.ru_utime + usage.ru_stime,
        "rss": usage.ru_maxrss / 1024,
        "phases": json.loads(output.strip().splitlines()[-1]),
    }


def machine() -> str:
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
        memory = (
            next(
                int(line.split()[1])
                for line in Path("/proc/meminfo").read_text().splitlines()
                if line.startswith("MemTotal")
            )
            / 1024
            / 1024
        )
    except (OSError, StopIteration, ValueError):
        memory = 0.0
    load = "/".join(f"{value:.1f}" for value in os.getloadavg())
    return (
        f"machine: {platform.machine()}, {model}, {os.cpu_count()} cores, {memory:.0f} GiB, "
        f"{platform.system()} {platform.release()}; Python {platform.python_version()} ({shown(sys.executable)}); "
        f"load average {load} at start"
    )


def write_site(nodes: int, folder: Path) -> Path:
    import yaml

    from tests.scale import scaled_site_data

    path = folder / f"site-{nodes}.yaml"
    path.write_text(yaml.safe_dump(scaled_site_data(nodes), sort_keys=False))
    return path


def measure(label: str, program: str, site_file: Path | None, runs: int) -> dict:
    samples = [run_child(program, site_file) for _ in range(runs)]
    walls = [s["wall"] for s in samples]
    return {
        "label": label,
        "median": statistics.median(walls),
        "min": min(walls),
        "max": max(walls),
        "cpu": statistics.median(s["cpu"] for s in samples),
        "rss": statistics.median(s["rss"] for s in samples),
        "phases": {p: statistics.median(s["phases"][p] for s in samples) for p in PHASES},
        "import_cpu": statistics.median(s["phases"][IMPORT_CPU] for s in samples),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="5,103,303,1000", help="node counts, comma-separated (each >= 4)")
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per size (median reported; >= 3)")
    parser.add_argument("--phases", action="store_true", help="also print the in-process phase breakdown")
    args = parser.parse_args()
    if args.runs < 3:
        parser.error("--runs must be at least 3 (a median of fewer says little)")
    sizes = [int(size) for size in args.sizes.split(",")]
    print(machine(), flush=True)
    print(
        f"runs per size: {args.runs}; wall = fresh process ({' '.join(['python', *app_flags()])}), spawn to exit; "
        f"ratio = median / floor median; cpu = CPU s of the process tree",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="tv-bench-sites-") as folder:
        results = [measure("floor", FLOOR, None, args.runs)]
        floor = results[0]["median"]
        print(
            f"{'nodes':>6} {'median s':>9} {'min-max s':>12} {'ratio':>6} {'cpu s':>6} {'peak MiB':>9} {'ms/node':>8}"
            "   (ms/node: slope from the previous size)"
        )
        print(
            f"{'floor':>6} {floor:>9.2f} {results[0]['min']:>5.2f}-{results[0]['max']:<6.2f} {1.0:>6.1f} "
            f"{results[0]['cpu']:>6.2f} {results[0]['rss']:>9.0f} {'':>8}",
            flush=True,
        )
        previous = None
        for size in sizes:
            result = measure(str(size), SITE, write_site(size, Path(folder)), args.runs)
            results.append(result)
            slope = "" if previous is None else f"{1000 * (result['median'] - previous[1]) / (size - previous[0]):.1f}"
            print(
                f"{size:>6} {result['median']:>9.2f} {result['min']:>5.2f}-{result['max']:<6.2f} "
                f"{result['median'] / floor:>6.1f} {result['cpu']:>6.2f} {result['rss']:>9.0f} {slope:>8}",
                flush=True,
            )
            previous = (size, result["median"])
    if args.phases:
        print(
            "phases (median s, in the process): import = cdktf, the library and the bindings (wall; cpu = CPU "
            "seconds of the Python process until then, interpreter start included); site = load and validate the "
            "site file; rest = interpreter start and exit, jsii shutdown"
        )
        print(f"{'nodes':>6} " + " ".join(f"{p:>7}" for p in PHASES) + f" {'rest':>7} {'imp cpu':>7}")
        for result in results:
            rest = result["median"] - sum(result["phases"].values())
            print(
                f"{result['label']:>6} "
                + " ".join(f"{result['phases'][p]:>7.2f}" for p in PHASES)
                + f" {rest:>7.2f} {result['import_cpu']:>7.2f}"
            )


if __name__ == "__main__":
    main()
