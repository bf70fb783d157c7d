#!/usr/bin/env python3
"""`make mutation`: mutation testing of the code that keeps the lifecycle promise and the guard (issue 27, ADR 0051).

    pipenv run python scripts/mutation.py [--keep] [--max-children N] [--no-fork-check]

1. Checks that the selected tests pass in a forked process (tests/mutation_fork.py gives each fork its own jsii
   kernel): mutmut forks one process per mutant, and a test failing for a reason of its own would count as a kill.
2. Runs mutmut as pyproject.toml [tool.mutmut] configures it: every mutant of the listed modules, each in a forked
   process, against the selected tests that reached the mutated function when the tests ran once unmutated (fastest
   first, stopping at the first failure). A fresh run removes mutants/ first; --keep reuses mutmut's results of the
   functions that did not change.
3. Prints the score per module and overall (killed / mutants, equivalents excluded) and every survivor with its
   diff, then compares the survivors with tests/mutation_survivors.txt, one line per mutant:
       <mutant> | <the mutation> | equivalent: <why no test can tell it from the original>
       <mutant> | <the mutation> | killed: <the test written for it>
       <mutant> | <the mutation> | open: <what a test would have to see>
   Exit 1 when a survivor is not in the file (or its mutation changed since), when a mutant the file says a test
   kills survives, or when a module scores under TARGET (open survivors count against the score).
The machine, its load average and the CPU time of the run are printed with the results.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
import tomllib
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SURVIVORS = ROOT / "tests" / "mutation_survivors.txt"
TARGET = 0.90
# Module (as the score is printed) -> the files it holds (prefixes of paths under the repository).
MODULES = {
    "terravixens/talos/": ("terravixens/talos/",),
    "constructs (node level)": tuple(
        f"terravixens/constructs/{name}.py"
        for name in ("talos_node", "control_plane", "cluster_config", "hypervisor", "flux_bootstrap", "cilium")
    ),
    "config/addressing.py": ("terravixens/config/addressing.py",),
    "config/placement.py": ("terravixens/config/placement.py",),
    "terravixens/guard/": ("terravixens/guard/",),
    "terravixens/rules/": ("terravixens/rules/",),
}
KILLED = {"killed", "timeout", "segfault"}  # the tests told the mutant from the original (a hang or a crash counts)
UNCHECKED = {"not checked", "skipped"}  # a run stopped before them: neither killed nor survived
STATUS = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests", 34: "skipped", 36: "timeout"}
STATUS.update({-24: "timeout", 24: "timeout", 152: "timeout", 255: "timeout", -11: "segfault", -9: "segfault"})


@dataclass(frozen=True)
class Mutant:
    name: str  # mutmut's: terravixens.config.addressing.x_managed__mutmut_10
    path: str  # terravixens/config/addressing.py
    status: str


def mutmut_config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]


def environment() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("JSII_NODE", str(ROOT / "node_modules" / ".bin" / "node"))
    env.setdefault("NODE_OPTIONS", "--disable-warning=DEP0044")
    return env


FORK_CHECK = """
import os, sys
import pytest
args = sys.argv[1:]
if pytest.main(args) != 0:
    sys.exit("the selected tests fail unmutated")
pid = os.fork()
if pid == 0:
    os._exit(pytest.main(args))
_, status = os.waitpid(pid, 0)
sys.exit(0 if os.waitstatus_to_exitcode(status) == 0 else "the selected tests fail in a forked process")
"""


def fork_check(config: dict) -> None:
    """The selected tests, once in a process and once in a fork of it (as mutmut runs a mutant)."""
    args = ["-q", "-x", *config["pytest_add_cli_args"], *config["pytest_add_cli_args_test_selection"]]
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", FORK_CHECK, *args], cwd=ROOT, env=environment(), check=False)
    if result.returncode != 0:
        sys.exit(f"make mutation: the fork check failed (exit {result.returncode}): no kill could be trusted")
    seconds = time.perf_counter() - started
    print(f"fork check: the selected tests pass in a process and in a fork of it ({seconds:.0f} s)")


def mutants() -> list[Mutant]:
    import json

    found = []
    for meta in sorted((ROOT / "mutants").rglob("*.py.meta")):
        path = str(meta.relative_to(ROOT / "mutants"))[: -len(".meta")]
        for name, code in json.loads(meta.read_text())["exit_code_by_key"].items():
            found.append(Mutant(name, path, STATUS.get(code, "suspicious") if code is not None else "not checked"))
    return found


def module_of(path: str) -> str:
    return next(module for module, prefixes in MODULES.items() if path.startswith(prefixes))


def mutation_text(mutant: Mutant) -> str:
    """The changed lines of the mutant, `-old / +new` on one line (what the survivors file records)."""
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    diff = get_diff_for_mutant(mutant.name, path=mutant.path)
    lines = [line for line in diff.splitlines() if line[:1] in "-+" and not line.startswith(("---", "+++"))]
    return " / ".join(f"{line[0]}{' '.join(line[1:].split())}" for line in lines).replace("|", "¦")


def diff_of(mutant: Mutant) -> str:
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    return get_diff_for_mutant(mutant.name, path=mutant.path)


def recorded() -> dict[str, tuple[str, str]]:
    """mutant -> (mutation, verdict) from tests/mutation_survivors.txt."""
    entries: dict[str, tuple[str, str]] = {}
    for number, line in enumerate(SURVIVORS.read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = [part.strip() for part in line.split(" | ")]
        if len(parts) != 3 or not parts[2].startswith(("equivalent: ", "killed: ", "open: ")):
            sys.exit(
                f"{SURVIVORS.relative_to(ROOT)}:{number}: want '<mutant> | <mutation> | equivalent: <why>', "
                f"'... | killed: <test>' or '... | open: <what a test must see>', got {line!r}"
            )
        entries[parts[0]] = (parts[1], parts[2])
    return entries


def record(found: list[Mutant]) -> None:
    """Survivors the file does not list (or lists with another mutation), appended as open: the baseline the next
    run compares with, each line to be turned into a test (`killed:`) or an argument (`equivalent:`)."""
    os.chdir(ROOT)
    entries = recorded()
    lines = []
    for mutant in found:
        if mutant.status in KILLED | UNCHECKED:
            continue
        text = mutation_text(mutant)
        if entries.get(mutant.name, ("",))[0] != text:
            function = mutant.name.rsplit("__mutmut_", 1)[0].rsplit(".", 1)[-1].replace("ǁ", ".").lstrip("x_.")
            verdict = "not reached by a selected test" if mutant.status == "no tests" else "no selected test fails"
            lines.append(f"{mutant.name} | {text} | open: {verdict} ({function}; {mutant.status})\n")
    if lines:
        with SURVIVORS.open("a") as out:
            out.writelines(lines)
    print(f"recorded {len(lines)} survivors as open in {SURVIVORS.relative_to(ROOT)}")


def report(found: list[Mutant], seconds: float, cpu: float, load: tuple[float, float]) -> int:
    os.chdir(ROOT)  # mutmut reads its configuration and mutants/ from here
    entries = recorded()
    status = {m.name: m for m in found}
    unchecked = [m for m in found if m.status in UNCHECKED]
    found = [m for m in found if m.status not in UNCHECKED]
    survivors = [m for m in found if m.status not in KILLED]
    texts = {m.name: mutation_text(m) for m in survivors}
    equivalent = {
        m.name
        for m in survivors
        if entries.get(m.name, ("", ""))[1].startswith("equivalent: ") and entries[m.name][0] == texts[m.name]
    }
    print(
        f"\nmachine: {platform.machine()}, {os.cpu_count()} cores; load average {load[0]:.1f} at the start, "
        f"{load[1]:.1f} at the end; {seconds / 60:.1f} min wall, {cpu / 60:.1f} min CPU (all processes)"
    )
    print(f"\n{'module':26} {'mutants':>7} {'killed':>7} {'surv.':>6} {'equiv.':>6} {'score':>7}")
    failed = []
    by_module: dict[str, Counter] = defaultdict(Counter)
    for mutant in found:
        counts = by_module[module_of(mutant.path)]
        counts["mutants"] += 1
        counts["killed"] += mutant.status in KILLED
        counts["survived"] += mutant.status not in KILLED
        counts["equivalent"] += mutant.name in equivalent
    total: Counter = Counter()
    for module in MODULES:
        counts = by_module[module]
        total.update(counts)
        score = counts["killed"] / max(counts["mutants"] - counts["equivalent"], 1)
        print(
            f"{module:26} {counts['mutants']:7} {counts['killed']:7} {counts['survived']:6} {counts['equivalent']:6} "
            f"{score:7.1%}"
        )
        if score < TARGET:
            failed.append(f"{module} scores {score:.1%}, under {TARGET:.0%}")
    score = total["killed"] / max(total["mutants"] - total["equivalent"], 1)
    print(
        f"{'all':26} {total['mutants']:7} {total['killed']:7} {total['survived']:6} {total['equivalent']:6} "
        f"{score:7.1%}"
    )
    print("\nsurvivors (not killed by any selected test):")
    for mutant in survivors:
        verdict = entries.get(mutant.name, ("", "not in tests/mutation_survivors.txt"))[1]
        print(f"  {mutant.name} ({mutant.status}) | {texts[mutant.name]} | {verdict}")
    still_open = {
        m.name
        for m in survivors
        if entries.get(m.name, ("", ""))[1].startswith("open: ") and entries[m.name][0] == texts[m.name]
    }
    if still_open:
        print(f"\n{len(still_open)} survivors recorded as open in {SURVIVORS.name} (no test kills them yet)")
    new = [m for m in survivors if m.name not in equivalent | still_open]
    for mutant in new:
        mutation, verdict = entries.get(mutant.name, ("", ""))
        why = (
            f"the file says {verdict!r}"
            if verdict.startswith("killed: ") and mutation == texts[mutant.name]
            else "its mutation changed since the file recorded it"
            if mutation
            else "not in the file"
        )
        failed.append(f"survivor {mutant.name} ({why}):\n{diff_of(mutant)}")
    stale = [
        name
        for name in entries
        if name not in status
        or (status[name].status in KILLED and entries[name][1].startswith(("equivalent: ", "open: ")))
    ]
    if stale:
        print("\nlines of tests/mutation_survivors.txt whose mutant is gone or now killed (remove them):")
        print("".join(f"  {name}\n" for name in stale), end="")
    if unchecked:
        failed.append(f"{len(unchecked)} mutants not checked: the run stopped before them (scores count only the rest)")
    if failed:
        print(f"\nmake mutation: {len(failed)} problem(s):\n" + "\n".join(failed))
        return 1
    print(f"\nmake mutation: every module at or above {TARGET:.0%}; every survivor recorded")
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keep", action="store_true", help="reuse mutants/ (mutmut's results of unchanged code)")
    parser.add_argument("--max-children", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--no-fork-check", action="store_true")
    parser.add_argument("--report-only", action="store_true", help="report the last run in mutants/ again")
    parser.add_argument(
        "--record",
        action="store_true",
        help=f"append every survivor {SURVIVORS.name} does not list, as open (to be triaged), before the comparison",
    )
    args = parser.parse_args()
    os.chdir(ROOT)
    load = os.getloadavg()[0]
    started = time.perf_counter()
    if not args.report_only:
        config = mutmut_config()
        if not args.no_fork_check:
            fork_check(config)
        if not args.keep:
            shutil.rmtree(ROOT / "mutants", ignore_errors=True)
        command = [sys.executable, "-m", "mutmut", "run", "--max-children", str(args.max_children)]
        result = subprocess.run(command, cwd=ROOT, env=environment(), stdout=subprocess.DEVNULL, check=False)
        if result.returncode != 0:
            sys.exit(f"make mutation: mutmut failed (exit {result.returncode}); run it to see why: {' '.join(command)}")
    if args.record:
        record(mutants())
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    sys.exit(
        report(mutants(), time.perf_counter() - started, usage.ru_utime + usage.ru_stime, (load, os.getloadavg()[0]))
    )


if __name__ == "__main__":
    main()
