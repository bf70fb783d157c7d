#!/usr/bin/env python
"""Whole-process synth time and peak memory against the number of nodes, as a ratio to the empty-app floor.

    pipenv run python benchmarks/synth_scale.py [--sizes 5,103,303,1000] [--runs 5] [--phases] [--against DIR]

Every measurement is a fresh process of the same interpreter (this venv), with the flags cdktf.json's "app" gives
it (`python -O main.py`: -O), timed from spawn to exit:
- the floor: an empty cdktf app (import cdktf, one empty stack, app.synth());
- each size: what `cdktf synth` runs (main.py) for a site file of 3 control planes and N-3 workers
  (tests/scale.py): the process' collector set as main.py sets it (terravixens.synth.one_synth_process), import,
  load and validate the site file, build every stack (rules on), synth, write JSON.
Reported per size: median wall (and min-max) over --runs, the ratio of the median to the floor's median, the median
CPU seconds of the process tree (Python and its jsii Node.js process: steadier than wall on a shared machine), the
peak resident memory (ru_maxrss from wait4: the largest single process of the tree — Python, or one of the two
node processes of its jsii runtime — not their sum), and the cost per node between consecutive sizes (ms/node).
--phases adds, per size, the median seconds of each phase measured inside the process and what is left
(interpreter start and exit, the jsii runtime's shutdown):
- import (cdktf, the library and the bindings), site (load and validate the site file);
- build (every stack built): its jsii round trips to Node.js, their count per node (the slope between sizes) and
  the share of build spent waiting on them (Node.js working, or the pipe);
- synth, split at the safety rules' validations (terravixens.rules.RuleSet, timed around each stack's run):
  prepare (cdktf's preparing pass over every stack, up to the first rules run), rules (the rules' walk over each
  stack, with what they ask of cdktf), write (the rest: cdktf resolving each stack to JSON and writing it, the
  manifest).
--against DIR measures another checkout (its `terravixens` first on the children's path; this checkout's interpreter,
bindings, Node.js and scaled sites) in the same rounds, right after each process of this one, and prints its tables
under its own: a before/after under the same load.
The CPU columns count the whole process tree (Python and Node.js): `cpu ratio` is each size's median CPU over the
floor's, the figure to compare on a loaded machine, where wall times follow the load.
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
import terravixens.synth
getattr(terravixens.synth, "one_synth_process", lambda: None)()  # what main.py does first (a tree before it: nothing)
import terravixens.stacks
from terravixens.config.loader import load_site
from terravixens.rules.ruleset import RuleSet
from jsii._kernel.providers.process import _NodeProcess
imported = time.perf_counter()
import_cpu = time.process_time()

# Every request to Node.js is one _NodeProcess.send (a callback into Python ends one send and starts the next):
# counted and timed per phase. The rules are timed around each stack's validation.
phase, calls, waited = "import", {}, {}
rules = {"first": None, "seconds": 0.0, "calls": 0}
send, validate = _NodeProcess.send, RuleSet.validate

def counted(self, request, response_type):
    before = time.perf_counter()
    try:
        return send(self, request, response_type)
    finally:
        calls[phase] = calls.get(phase, 0) + 1
        waited[phase] = waited.get(phase, 0.0) + time.perf_counter() - before

def timed(self):
    before, sent = time.perf_counter(), calls.get(phase, 0)
    rules["first"] = rules["first"] or before
    try:
        return validate(self)
    finally:
        rules["seconds"] += time.perf_counter() - before
        rules["calls"] += calls.get(phase, 0) - sent

_NodeProcess.send, RuleSet.validate = counted, timed
site = load_site(sys.argv[2])
loaded = time.perf_counter()
phase = "build"
app = terravixens.stacks.build_app(site, sys.argv[1])
built = time.perf_counter()
phase = "synth"
app.synth()
done = time.perf_counter()
prepare = (rules["first"] or done) - built
print(json.dumps({"import": imported - started, "site": loaded - imported, "build": built - loaded,
                  "synth": done - built, "import_cpu": import_cpu,
                  "build_calls": calls.get("build", 0), "build_waited": waited.get("build", 0.0),
                  "synth_calls": calls.get("synth", 0), "prepare": prepare, "rules": rules["seconds"],
                  "rules_calls": rules["calls"], "write": done - built - prepare - rules["seconds"]}))
"""

PHASES = ("import", "site", "build", "synth")
IMPORT_CPU = "import_cpu"  # CPU seconds of the Python process up to the end of the imports (startup included)
# Measured in the process besides the phases (the floor has none of them: 0).
DETAILS = ("build_calls", "build_waited", "synth_calls", "prepare", "rules", "rules_calls", "write")


def app_flags() -> list[str]:
    """The interpreter flags of cdktf.json's "app" (e.g. `pipenv run python -O main.py` -> ["-O"])."""
    words = json.loads((ROOT / "cdktf.json").read_text())["app"].split()
    start = next((index for index, word in enumerate(words) if Path(word).name.startswith("python")), None)
    if start is None:
        return []
    return [word for word in words[start + 1 :] if word.startswith("-")]


def child_env(tree: Path = ROOT) -> dict[str, str]:
    """The child's environment: `tree`'s code first on the path (this checkout, or the one --against names)."""
    env = dict(os.environ)
    node = ROOT / "node_modules" / ".bin" / "node"
    if node.exists():
        env.setdefault("JSII_NODE", str(node))  # the project's Node.js, as `make` uses it
    env.setdefault("NODE_OPTIONS", "--disable-warning=DEP0044")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tree), env.get("PYTHONPATH")]))
    env["PYTHONSAFEPATH"] = "1"  # `python -c` would put the folder it runs in first: `tree`'s code, wherever it runs
    return env


def run_child(program: str, site_file: Path | None, tree: Path = ROOT) -> dict:
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
            child_env(tree),
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


def summary(label: str, samples: list[dict]) -> dict:
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
        "details": {d: statistics.median(s["phases"].get(d, 0) for s in samples) for d in DETAILS},
    }


def measure(sizes: list[int], site_files: dict[int, Path], runs: int, trees: list[Path]) -> dict[Path, list[dict]]:
    """`runs` rounds, each one fresh process of the floor and of every size in turn, for each tree in turn: on a
    shared machine the load moves, and interleaving spreads it over every column (and every tree) alike instead of
    over one size."""
    samples: dict[Path, dict[str, list[dict]]] = {
        tree: {"floor": [], **{str(size): [] for size in sizes}} for tree in trees
    }
    for _ in range(runs):
        for tree in trees:
            samples[tree]["floor"].append(run_child(FLOOR, None, tree))
            for size in sizes:
                samples[tree][str(size)].append(run_child(SITE, site_files[size], tree))
    return {tree: [summary(label, found) for label, found in by_size.items()] for tree, by_size in samples.items()}


def slope(result: dict, previous: dict | None, value) -> str:
    """Per node between two consecutive sizes (the fixed part of a synth cancels out)."""
    if previous is None:
        return ""
    return f"{(value(result) - value(previous)) / (int(result['label']) - int(previous['label'])):.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="5,103,303,1000", help="node counts, comma-separated (each >= 4)")
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per size (median reported; >= 3)")
    parser.add_argument("--phases", action="store_true", help="also print the in-process phase breakdown")
    parser.add_argument(
        "--against",
        type=Path,
        help="another checkout of terravixens (e.g. `git worktree add` of main) measured in the same rounds, each "
        "process of this tree followed by the same one of that tree: a before/after under the same load",
    )
    args = parser.parse_args()
    if args.runs < 3:
        parser.error("--runs must be at least 3 (a median of fewer says little)")
    sizes = [int(size) for size in args.sizes.split(",")]
    for key in ("JSII_NODE", "NODE_OPTIONS"):  # the scaled sites are built with the library here too
        os.environ.setdefault(key, child_env()[key])
    print(machine(), flush=True)
    print(
        f"runs per size: {args.runs}, interleaved (floor, then each size, per round); wall = fresh process "
        f"({' '.join(['python', *app_flags()])}), spawn to exit; ratio = median / floor median; cpu = CPU s of the "
        f"process tree (Python and Node.js), cpu ratio = its median / the floor's",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="tv-bench-sites-") as folder:
        trees = [ROOT, *([args.against.resolve()] if args.against else [])]
        measured = measure(sizes, {size: write_site(size, Path(folder)) for size in sizes}, args.runs, trees)
    for tree, results in measured.items():
        if args.against:
            print(f"tree: {'this checkout' if tree == ROOT else shown(args.against)} ({revision(tree)})")
        report(results, args.phases)
    print(f"load average {'/'.join(f'{value:.1f}' for value in os.getloadavg())} at the end")


def revision(tree: Path) -> str:
    """The tree's commit, as git names it (its working tree may differ)."""
    import subprocess

    found = subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    )
    return found.stdout.strip() or "not a git checkout"


def report(results: list[dict], phases: bool) -> None:
    floor, floor_cpu = results[0]["median"], results[0]["cpu"]
    print(
        f"{'nodes':>6} {'median s':>9} {'min-max s':>12} {'ratio':>6} {'cpu s':>6} {'cpu ratio':>9} "
        f"{'peak MiB':>9} {'ms/node':>8}   (ms/node: slope of the median from the previous size)"
    )
    previous = None
    for result in results:
        print(
            f"{result['label']:>6} {result['median']:>9.2f} {result['min']:>5.2f}-{result['max']:<6.2f} "
            f"{result['median'] / floor:>6.1f} {result['cpu']:>6.2f} {result['cpu'] / floor_cpu:>9.1f} "
            f"{result['rss']:>9.0f} {slope(result, previous, lambda r: 1000 * r['median']):>8}"
        )
        previous = None if result["label"] == "floor" else result
    if phases:
        print(
            "phases (median s, in the process): import = cdktf, the library and the bindings (imp cpu = CPU s of the "
            "Python process until then, interpreter start included); site = load and validate the site file; build "
            "= every stack built (jsii = round trips to Node.js in build and synth, /node = their slope from the "
            "previous size, wait = share of build spent waiting on them); synth = prepare (cdktf's preparing pass) "
            "+ rules (the safety rules' walk of every stack) + write (resolve and write each stack's JSON); rest = "
            "interpreter start and exit, jsii shutdown"
        )
        print(
            f"{'nodes':>6} {'import':>7} {'site':>6} {'build':>6} {'jsii':>6} {'/node':>6} {'wait':>5} {'synth':>6} "
            f"{'prepare':>7} {'rules':>6} {'write':>6} {'rest':>6} {'imp cpu':>7}"
        )
        previous = None
        for result in results:
            phases, details = result["phases"], result["details"]
            rest = result["median"] - sum(phases.values())
            build_calls = int(details["build_calls"] + details["synth_calls"])
            wait = f"{100 * details['build_waited'] / phases['build']:.0f}%" if result["label"] != "floor" else ""
            per_node = slope(result, previous, lambda r: r["details"]["build_calls"] + r["details"]["synth_calls"])
            print(
                f"{result['label']:>6} {phases['import']:>7.2f} {phases['site']:>6.2f} {phases['build']:>6.2f} "
                f"{build_calls:>6} {per_node:>6} {wait:>5} {phases['synth']:>6.2f} {details['prepare']:>7.2f} "
                f"{details['rules']:>6.2f} {details['write']:>6.2f} {rest:>6.2f} {result['import_cpu']:>7.2f}"
            )
            previous = None if result["label"] == "floor" else result


if __name__ == "__main__":
    main()
