#!/usr/bin/env python3
"""`make mutation`: mutation testing of the code that keeps the lifecycle promise and the guard (issue 27, ADR 0051).

    pipenv run python scripts/mutation.py [--keep] [--max-children N] [--reuse N] [--recheck] [--report-only]
                                          [--record] [--module MODULE] [MUTANT ...]

`--module terravixens/guard/` runs (and reports) one module of MODULES: its mutants against its judges only (the
traced run too), the rest of mutants/ left as it is. MUTANT names (globs allowed) run only those mutants.

1. Runs mutmut as pyproject.toml [tool.mutmut] configures it, in a process of its own (`--engine`): mypy once over
   the mutants (a mutant `make lint` rejects is caught without a test), then every other mutant of the listed
   modules, each in a forked process (tests/mutation_fork.py lends it a jsii kernel the engine started, --reuse
   forks in turn), against the JUDGES of its file that reached the mutated function when the tests ran once
   unmutated — directly or through a shared fixture (tests/mutation_plugin.py) — cheapest first, stopping at the
   first failure, each test under a CPU limit. The unmutated tests run once more in a fork first: a test failing
   there for a reason of its own would count as a kill. A fresh run removes mutants/ first; --keep reuses mutmut's
   results of the functions that did not change. A survivor the survivors file argues equivalent (same mutation)
   is not run again unless --recheck.
2. Prints the score per module and overall (killed / mutants, equivalents excluded), which tests killed them, and
   every survivor, then compares the survivors with tests/mutation_survivors.txt, one line per mutant:
       <mutant> | <the mutation> | equivalent: <why no test can tell it from the original>
       <mutant> | <the mutation> | killed: <the test written for it>
       <mutant> | <the mutation> | open: <what a test would have to see>
   Exit 1 when a survivor is not in the file (or its mutation changed since), when a mutant the file says a test
   kills survives, or when a module scores under TARGET (open survivors count against the score).
The machine, its load average and the CPU time of the run (all processes) are printed with the results.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SURVIVORS = ROOT / "tests" / "mutation_survivors.txt"
KILLS = ROOT / "mutants" / "mutation-kills.tsv"  # mutant, the test that failed, its phase (tests/mutation_plugin.py)
COST = ROOT / "mutants" / "mutation-cost.tsv"  # mutant, CPU seconds of its fork, of its kernel (Node.js)
MYPY = ROOT / "mutants" / "mutation-mypy.txt"  # mutants mypy caught (the project's lint rejects them)
SKIPPED = ROOT / "mutants" / "mutation-equivalents.txt"  # recorded equivalents this run did not run again
TARGET = 0.90
REUSE = 20  # forks (mutants) one jsii kernel serves before it is replaced (tests/mutation_fork.py, KernelPool)
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
# The tests that judge a file's mutants (test files or node ids; the first path prefix that matches the file wins).
# A mutant runs those of them that reached its function unmutated: in the test itself or in a shared fixture.
SYNTH = ("tests/test_snapshots.py", "tests/test_storage.py", "tests/test_library_use.py", "tests/test_scenarios.py")
SWEEP = (
    "tests/test_size_sweep.py::test_one_node_changes_and_no_other_node_does[4-3]",
    "tests/test_size_sweep.py::test_one_node_changes_and_no_other_node_does[1-1]",
)
# A node's resources as elements and as blocks from Python write the same bytes (ADR 0057): each way is judged.
PYTHON_BLOCKS = (
    *(
        f"tests/test_python_blocks.py::test_every_test_site_writes_the_same_bytes[{site}]"
        for site in ("example", "static-macs", "storage-and-csi", "routable-taints-tags")
    ),
    "tests/test_python_blocks.py::test_other_sites_and_decommission_builds_write_the_same_bytes",
    "tests/test_python_blocks.py::test_a_node_without_the_guest_agent_writes_the_same_bytes",
    "tests/test_python_blocks.py::test_reading_a_nodes_element_makes_every_node_of_the_stack_elements",
)
JUDGES: dict[str, tuple[str, ...]] = {
    "terravixens/talos/rolling.py": ("tests/test_upgrade.py",),
    # Compared with PyYAML's emitter on generated documents of its whole domain: the synth tests see a few patches.
    "terravixens/talos/yaml_text.py": ("tests/test_patches.py",),
    # What `maintain` takes down and brings back, and when it refuses: pure functions no synth test reaches (the run
    # that acts on them, tests/test_maintain.py with fake hypervisors and clusters, is far dearer).
    "terravixens/talos/maintenance.py": ("tests/test_maintenance_plan.py",),
    "terravixens/talos/": ("tests/test_talos_image.py", "tests/test_patches.py", *SYNTH),
    # The cheapest judges first (one construct, then a user's small stack, then the example's stacks): most
    # construct mutants die in the first test that reaches them.
    "terravixens/constructs/": (
        "tests/test_node_constructs.py",
        "tests/test_library_use.py",
        *(test for test in SYNTH if test != "tests/test_library_use.py"),
        "tests/test_conformance.py",
        "tests/test_chart_sources.py",
        "tests/test_synth_output.py",
        "tests/test_stack_dependencies.py",
        "tests/test_rules.py",
        *SWEEP,
        *PYTHON_BLOCKS,
    ),
    # test_patches places nodes of every network shape (routable, VLANs, maintenance only) and reads the pins back.
    "terravixens/config/": ("tests/test_addressing.py", "tests/test_patches.py", *SYNTH, *SWEEP),
    # What a credentials renewal may change: judged on hand-made plans (the renewal's own tests synthesize).
    "terravixens/guard/credentials.py": ("tests/test_guard_credentials.py",),
    "terravixens/guard/": ("tests/test_guard.py", "tests/test_guard_usage.py"),
    "terravixens/rules/": (
        "tests/test_rule_checks.py",  # each rule on a hand-built view: no synth, first
        "tests/test_rules.py",
        "tests/test_rule_view.py",
        "tests/test_rule_overrides.py",
        *SYNTH,
    ),
}
# Never selected: the real Terraform CLI, and Python in a subprocess, run code mutmut does not trace to a mutant.
DESELECT = (
    "--deselect",
    "tests/test_guard.py::test_the_real_shapes_are_what_terraform_plans_today",
    "--deselect",
    "tests/test_rules.py::test_a_rule_fails_synth_under_python_O",
    "--deselect",
    "tests/test_rule_overrides.py::test_import_order_does_not_matter",
    "--deselect",
    "tests/test_synth_output.py::test_main_synthesizes_the_example_site_like_cdktf_synth",
    "--deselect",
    "tests/test_synth_output.py::test_main_prints_site_errors_without_traceback",
    "-k",
    "not test_cli_",
)
LINKED = ("tools", "node_modules")  # what the tests call from the repository, linked into mutants/
KILLED = {
    "killed",
    "timeout",
    "segfault",
    "mypy",
}  # the tests told the mutant from the original (a hang or a crash counts)
UNCHECKED = {"not checked", "skipped"}  # a run stopped before them: neither killed nor survived
STATUS = {
    1: "killed",
    3: "killed",
    37: "mypy",
    0: "survived",
    5: "no tests",
    33: "no tests",
    34: "skipped",
    36: "timeout",
}
STATUS.update({-24: "timeout", 24: "timeout", 152: "timeout", 255: "timeout", -11: "segfault", -9: "segfault"})


@dataclass(frozen=True)
class Mutant:
    name: str  # mutmut's: terravixens.config.addressing.x_managed__mutmut_10
    path: str  # terravixens/config/addressing.py
    status: str


def selection() -> list[str]:
    """The tests mutmut runs (its pytest_add_cli_args_test_selection): every judge (of $TV_MUTATION_MODULE's files
    when it is set), in order, once."""
    prefixes = MODULES.get(os.environ.get("TV_MUTATION_MODULE", ""), ())
    judges = list(
        dict.fromkeys(
            test
            for prefix, tests in JUDGES.items()
            if not prefixes or any(p.startswith(prefix) or prefix.startswith(p) for p in prefixes)
            for test in tests
        )
    )
    return [*judges, *DESELECT]


def judges_of(path: str) -> tuple[str, ...]:
    return next(tests for prefix, tests in JUDGES.items() if path.startswith(prefix))


def path_of_function(key: str) -> str:
    """terravixens.guard.x_check_plan -> terravixens/guard/__init__.py (mutmut's key of a mutated function)."""
    from mutmut.utils.format_utils import get_module_from_key

    module = get_module_from_key(key).replace(".", "/")
    return f"{module}.py" if (ROOT / f"{module}.py").exists() else f"{module}/__init__.py"


def environment() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("JSII_NODE", str(ROOT / "node_modules" / ".bin" / "node"))
    env.setdefault("NODE_OPTIONS", "--disable-warning=DEP0044")
    env["TV_MUTATION_KILLS"] = str(KILLS)
    env["TV_MUTATION_COST"] = str(COST)
    return env


def mutants() -> list[Mutant]:
    found = []
    for meta in sorted((ROOT / "mutants").rglob("*.py.meta")):
        path = str(meta.relative_to(ROOT / "mutants"))[: -len(".meta")]
        for name, code in json.loads(meta.read_text())["exit_code_by_key"].items():
            found.append(Mutant(name, path, STATUS.get(code, "suspicious") if code is not None else "not checked"))
    return found


def module_of(path: str) -> str:
    return next(module for module, prefixes in MODULES.items() if path.startswith(prefixes))


def mutation_text(name: str, path: str) -> str:
    """The changed lines of the mutant, `-old / +new` on one line (what the survivors file records)."""
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    diff = get_diff_for_mutant(name, path=path)
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


# --- the engine: mutmut in this process, with three changes -------------------------------------------------------


def _skip_recorded_equivalents() -> None:
    """Mark each mutant the survivors file argues equivalent, with the same mutation, as survived without running it
    (a survivor runs every judge that reaches its function: the dearest mutants of a run)."""
    from mutmut.mutation.data import SourceFileMutationData
    from mutmut.utils.file_utils import walk_mutatable_files

    equivalent = {name: text for name, (text, verdict) in recorded().items() if verdict.startswith("equivalent: ")}
    skipped = []
    for path in walk_mutatable_files():
        data = SourceFileMutationData(path=path)
        data.load()
        changed = False
        for name, code in data.exit_code_by_key.items():
            if code is None and name in equivalent and mutation_text(name, str(path)) == equivalent[name]:
                data.exit_code_by_key[name] = 0
                skipped.append(name)
                changed = True
        if changed:
            data.save()
    SKIPPED.write_text("".join(f"{name}\n" for name in skipped))
    print(f"    {len(skipped)} mutants argued equivalent in {SURVIVORS.name}: not run again (--recheck runs them)")


def _restrict_to_judges() -> None:
    """Each mutated function keeps only the tests that judge its file (JUDGES); mutmut's saved stats keep them all."""
    from mutmut.state import state

    tests = state().tests_by_mangled_function_name
    kept = dropped = 0
    for key, names in tests.items():
        judges = judges_of(path_of_function(key))
        chosen = {name for name in names if name.startswith(judges)}
        kept += len(chosen)
        dropped += len(names) - len(chosen)
        tests[key] = chosen
    print(f"    (function, test) pairs: {kept} kept, {dropped} dropped (the test does not judge the function's file)")


def _judges_first(mutant: str, tests: list[str]) -> list[str]:
    """A mutant's tests in the order its file's JUDGES list them (the likeliest killers first), then cheapest first."""
    from mutmut.state import state
    from mutmut.utils.format_utils import mangled_name_from_mutant_name

    judges = judges_of(path_of_function(mangled_name_from_mutant_name(mutant)))
    rank = {judge: number for number, judge in enumerate(judges)}

    def key(test: str) -> tuple[int, float]:
        first = min((rank[judge] for judge in judges if test.startswith(judge)), default=len(judges))
        return first, state().duration_by_test.get(test, 0.0)

    return sorted(tests, key=key)


def _function_spans(path: Path) -> list[tuple[str, int, int]]:
    """(name, first line, last line) of every mutant's and original's copy in a file of mutants/ (ast: milliseconds,
    where libcst takes minutes on the guard's files)."""
    import ast

    return [
        (node.name, node.lineno, node.end_lineno or node.lineno)
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef)
        and node.name.rpartition("__mutmut_")[2].isdigit() | node.name.endswith(ORIG)
    ]


ORIG = "__mutmut_orig"
SUMMARY: list[str] = []  # what the engine measured, for mutants/mutmut.log


def rejected_by_mypy(directory: Path, command: list[str]) -> dict[str, tuple[str, int, int, str]]:
    """Mutant -> (file, first and last line of its copy, the error) for every mutant the type checker rejects: run
    once over directory (mutants/), a mutant is rejected when its copy of the function has an error (message) that the
    original's copy, in the same file and class, does not have. mutmut's own filter would stop at the errors of its
    trampolines (unused `type: ignore`s) and count errors the original shares."""
    from mutmut.type_checking import run_type_checker
    from mutmut.utils.format_utils import get_mutant_name

    # `.venv/bin/python scripts/mutation.py` without the virtualenv on PATH: the interpreter's own mypy, not none
    # (mutmut reads the output as mypy's when an argument is "mypy" itself)
    if command[0] == "mypy" and shutil.which("mypy") is None:
        command = [sys.executable, "-m", *command]
    here = Path.cwd()
    os.chdir(directory)
    try:
        by_file: dict[Path, list[Any]] = defaultdict(list)
        for error in run_type_checker(command):
            by_file[error.file_path].append(error)
        rejected = {}
        for path, errors in by_file.items():
            spans = {name: (start, end) for name, start, end in _function_spans(path)}
            copies: dict[str, Counter] = defaultdict(Counter)
            for error in errors:
                name = next((n for n, (start, end) in spans.items() if start <= error.line_number <= end), None)
                if name is not None:
                    copies[name][re.sub(r"__mutmut_\w+", "", error.error_description)] += 1
            for name, messages in copies.items():
                new = messages - copies.get(name.rpartition("__mutmut_")[0] + ORIG, Counter())
                if not name.endswith(ORIG) and new:
                    relative = path.relative_to(Path.cwd())
                    rejected[get_mutant_name(relative, name)] = (str(relative), *spans[name], next(iter(new)))
    finally:
        os.chdir(here)
    return rejected


def caught_by_mypy() -> dict[str, Any]:
    """mutmut's filter_mutants_with_type_checker, as rejected_by_mypy decides: mutmut records each caught mutant
    (exit code 37) instead of running its tests; the names are kept in mutants/mutation-mypy.txt."""
    from mutmut.configuration import config
    from mutmut.mutation.file_mutation import FailedTypeCheckMutant, MutatedMethodLocation
    from mutmut.type_checking import TypeCheckingError

    started, cpu = time.perf_counter(), _children_seconds()
    rejected = rejected_by_mypy(ROOT / "mutants", config().type_check_command)
    caught = {}
    for name, (path, start, end, message) in rejected.items():
        function = name.rsplit(".", 1)[-1]
        location = MutatedMethodLocation(Path(path), function, line_number_start=start, line_number_end=end)
        error = TypeCheckingError(file_path=Path(path), line_number=start, error_description=message)
        caught[name] = FailedTypeCheckMutant(method_location=location, name=name, error=error)
    MYPY.write_text("".join(f"{name}\n" for name in sorted(caught)))
    SUMMARY.append(  # printed after mutmut's run: its spinner swallows what is printed while it turns
        f"mypy: {len(caught)} mutants rejected, in {time.perf_counter() - started:.0f} s wall, "
        f"{_children_seconds() - cpu:.0f} s CPU"
    )
    return caught


def _no_tests_but_mypy() -> None:
    """mutmut decides "no tests" before it asks the type checker: a mutant no test reaches that mypy rejects is
    caught all the same."""
    from mutmut.mutation.data import SourceFileMutationData
    from mutmut.utils.file_utils import walk_mutatable_files

    caught = set(MYPY.read_text().split()) if MYPY.exists() else set()
    for path in walk_mutatable_files():
        data = SourceFileMutationData(path=path)
        data.load()
        names = [name for name, code in data.exit_code_by_key.items() if code in (5, 33) and name in caught]
        for name in names:
            data.exit_code_by_key[name] = 37
        if names:
            data.save()


def _children_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def engine(names: list[str], max_children: int, recheck: bool, reuse: int) -> None:
    import mutmut.__main__ as mutmut_main
    from mutmut.configuration import config
    from mutmut.runners.harness import PytestRunner
    from mutmut.workers import isolation

    config().pytest_add_cli_args_test_selection = selection()
    create_mutants = mutmut_main.create_mutants
    collect_or_load_stats = mutmut_main.collect_or_load_stats

    def create(max_children: int) -> mutmut_main.MutantGenerationStats:
        stats = create_mutants(max_children)
        if not recheck:
            _skip_recorded_equivalents()
        return stats

    def collect(runner: isolation.MutantRunner, **kwargs: Any) -> None:
        collect_or_load_stats(runner, **kwargs)
        _restrict_to_judges()

    pools: list[Any] = []

    def kernels() -> Any:
        """The KernelPool, made on first use: after mutmut put mutants/ first on sys.path, so tests.mutation_fork is
        the module pytest loads with -p (mutants/tests/mutation_fork.py)."""
        if not pools:
            from tests import mutation_fork

            pools.append(mutation_fork.KernelPool(reuse))
        return pools[0]

    def clean_tests_in_a_fork(self: isolation.ForkRunner, tests: object) -> int:
        """The unmutated tests in a fork on a lent kernel, as a mutant runs: a failure of the fork's own would count
        as a kill."""
        if reuse:
            kernels().lend("(clean)")
        try:
            code = isolation.run_in_fork(self.test_runner.run_tests, mutant_name=None, tests=tests)
        finally:
            kernels().forked() if reuse else None
        if reuse:
            kernels().back("(clean)", code)
        return code

    submit = isolation.ForkRunner.submit
    wait_for_result = isolation.ForkRunner.wait_for_result

    def submit_on_a_lent_kernel(
        self: isolation.ForkRunner, mutant_name: str, tests: list[str], cpu_time_limit: int, estimated_time: float
    ) -> None:
        if not tests:  # mutmut forks nothing
            return submit(self, mutant_name, tests, cpu_time_limit, estimated_time)
        kernels().lend(mutant_name)
        try:
            submit(self, mutant_name, tests, cpu_time_limit, estimated_time)
        finally:
            kernels().forked()

    def take_the_kernel_back(self: isolation.ForkRunner, timeout: float | None = None) -> isolation.MutantResult:
        result = wait_for_result(self, timeout)
        if result.mutant_name in kernels().lent:
            kernels().back(result.mutant_name, result.exit_code)
        return result

    run_tests = PytestRunner.run_tests

    def run_judges_first(self: PytestRunner, *, mutant_name: str | None, tests: Iterable[str]) -> int:
        ordered = _judges_first(mutant_name, list(tests)) if mutant_name else tests
        return run_tests(self, mutant_name=mutant_name, tests=ordered)

    # The tests run in mutants/ (mutmut's copy): the built tools and Node.js they call are linked, not copied.
    for name in LINKED:
        if not (ROOT / "mutants" / name).exists():
            (ROOT / "mutants" / name).symlink_to(ROOT / name)
    mutmut_main.create_mutants = create
    mutmut_main.filter_mutants_with_type_checker = caught_by_mypy
    PytestRunner.run_tests = run_judges_first  # type: ignore[method-assign]
    mutmut_main.collect_or_load_stats = collect
    isolation.ForkRunner.run_clean_tests = clean_tests_in_a_fork  # type: ignore[method-assign]
    if reuse:
        isolation.ForkRunner.submit = submit_on_a_lent_kernel  # type: ignore[method-assign]
        isolation.ForkRunner.wait_for_result = take_the_kernel_back  # type: ignore[method-assign]
    try:
        mutmut_main._run(names, max_children)
        _no_tests_but_mypy()
    finally:
        print("\n".join(SUMMARY))
        for pool in pools:
            print(
                f"kernels: {pool.started} started for forks ({pool.start_seconds:.1f} s CPU to start and load), "
                f"each lent to {reuse} forks at most; {pool.stopped} stopped"
            )
            pool.close()


# --- the report -------------------------------------------------------------------------------------------------


def record(found: list[Mutant]) -> None:
    """Survivors the file does not list (or lists with another mutation), appended as open: the baseline the next
    run compares with, each line to be turned into a test (`killed:`) or an argument (`equivalent:`)."""
    os.chdir(ROOT)
    entries = recorded()
    lines = []
    for mutant in found:
        if mutant.status in KILLED | UNCHECKED:
            continue
        text = mutation_text(mutant.name, mutant.path)
        if entries.get(mutant.name, ("",))[0] != text:
            function = mutant.name.rsplit("__mutmut_", 1)[0].rsplit(".", 1)[-1].replace("ǁ", ".").lstrip("x_.")
            verdict = "not reached by a selected test" if mutant.status == "no tests" else "no selected test fails"
            lines.append(f"{mutant.name} | {text} | open: {verdict} ({function}; {mutant.status})\n")
    if lines:
        with SURVIVORS.open("a") as out:
            out.writelines(lines)
    print(f"recorded {len(lines)} survivors as open in {SURVIVORS.relative_to(ROOT)}")


def killers(found: list[Mutant]) -> dict[str, Counter]:
    """Module -> what killed its mutants first: the test file whose test failed first (tests/mutation_plugin.py's
    record; a mutant run again with --keep and its name: its last run), mypy, or a timeout or crash."""
    last: dict[str, str] = {}
    if KILLS.exists():
        for line in KILLS.read_text().splitlines():
            name, test, _ = line.split("\t")
            last[name] = test.split("::")[0]
    by_module: dict[str, Counter] = defaultdict(Counter)
    for mutant in found:
        if mutant.status == "mypy":
            label = "mypy (make lint)"
        elif mutant.status == "killed" and mutant.name in last:
            label = last[mutant.name]
        elif mutant.status in KILLED:
            label = f"({mutant.status}: no test failed first)"
        else:
            continue
        by_module[module_of(mutant.path)][label] += 1
    return by_module


def costs(found: list[Mutant]) -> dict[str, list[float]]:
    """Module -> CPU seconds of each mutant its tests ran for this run (its fork and its kernel, from
    tests/mutation_plugin.py's record; a fork ended by a signal records nothing)."""
    paths = {m.name: m.path for m in found}
    last: dict[str, float] = {}  # a mutant run again (--keep and its name): its last run
    if COST.exists():
        for line in COST.read_text().splitlines():
            name, fork, kernel = line.split("\t")
            if name in paths:
                last[name] = float(fork) + float(kernel)
    by_module: dict[str, list[float]] = defaultdict(list)
    for name, seconds in last.items():
        by_module[module_of(paths[name])].append(seconds)
    return by_module


def module_globs(module: str) -> list[str]:
    """terravixens/guard/ -> terravixens.guard.*; terravixens/constructs/cilium.py -> terravixens.constructs.cilium.*"""
    return [prefix.removesuffix(".py").rstrip("/").replace("/", ".") + ".*" for prefix in MODULES[module]]


def report(
    found: list[Mutant], seconds: float, cpu: float, load: tuple[float, float], module: str | None = None
) -> int:
    os.chdir(ROOT)  # mutmut reads its configuration and mutants/ from here
    entries = recorded()
    if module:  # one module's run: its mutants and its lines of the survivors file only
        found = [m for m in found if module_of(m.path) == module]
        globs = module_globs(module)
        entries = {name: entry for name, entry in entries.items() if any(fnmatch(name, g) for g in globs)}
    status = {m.name: m for m in found}
    unchecked = [m for m in found if m.status in UNCHECKED]
    found = [m for m in found if m.status not in UNCHECKED]
    survivors = [m for m in found if m.status not in KILLED]
    texts = {m.name: mutation_text(m.name, m.path) for m in survivors}
    equivalent = {
        m.name
        for m in survivors
        if entries.get(m.name, ("", ""))[1].startswith("equivalent: ") and entries[m.name][0] == texts[m.name]
    }
    not_rerun = set(SKIPPED.read_text().split()) if SKIPPED.exists() else set()
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
    for name in [module] if module else MODULES:
        counts = by_module[name]
        total.update(counts)
        score = counts["killed"] / max(counts["mutants"] - counts["equivalent"], 1)
        print(
            f"{name:26} {counts['mutants']:7} {counts['killed']:7} {counts['survived']:6} {counts['equivalent']:6} "
            f"{score:7.1%}"
        )
        if score < TARGET:
            failed.append(f"{name} scores {score:.1%}, under {TARGET:.0%}")
    score = total["killed"] / max(total["mutants"] - total["equivalent"], 1)
    print(
        f"{'all':26} {total['mutants']:7} {total['killed']:7} {total['survived']:6} {total['equivalent']:6} "
        f"{score:7.1%}"
    )
    if not_rerun:
        print(f"({len(not_rerun & equivalent)} of the equivalents recorded before, not run again: --recheck runs them)")
    print("\nCPU per mutant whose tests ran (its fork and its jsii kernel): median, mean, total")
    for name, seconds in costs(found).items():
        print(
            f"  {name}: {statistics.median(seconds):.2f} s, {statistics.mean(seconds):.2f} s, "
            f"{sum(seconds) / 60:.1f} min ({len(seconds)} mutants)"
        )
    print("\nkilled first by (test file: mutants):")
    for module, counts in killers(found).items():
        print(f"  {module}: " + ", ".join(f"{test} {count}" for test, count in counts.most_common()))
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
    parser.add_argument(
        "--reuse",
        type=int,
        default=REUSE,
        help=f"forks a kernel serves before it is replaced (default {REUSE}; 0: a new Node.js process per fork)",
    )
    parser.add_argument("--recheck", action="store_true", help="run the mutants recorded as equivalent again")
    parser.add_argument("--report-only", action="store_true", help="report the last run in mutants/ again")
    parser.add_argument(
        "--record",
        action="store_true",
        help=f"append every survivor {SURVIVORS.name} does not list, as open (to be triaged), before the comparison",
    )
    parser.add_argument("--engine", action="store_true", help=argparse.SUPPRESS)  # mutmut itself, in this process
    parser.add_argument("--module", choices=sorted(MODULES), help="run and report this module only")
    parser.add_argument("mutants", nargs="*", help="only these mutants (mutmut's names, globs allowed)")
    args = parser.parse_args()
    os.chdir(ROOT)
    if args.module:
        os.environ["TV_MUTATION_MODULE"] = args.module
        args.mutants = args.mutants or module_globs(args.module)
    if args.engine:
        engine(args.mutants, args.max_children, args.recheck, args.reuse)
        return
    load = os.getloadavg()[0]
    started = time.perf_counter()
    if not args.report_only:
        if not args.keep:
            shutil.rmtree(ROOT / "mutants", ignore_errors=True)
        command = [sys.executable, __file__, "--engine", "--max-children", str(args.max_children)]
        command += ["--reuse", str(args.reuse)]
        command += ["--recheck"] * args.recheck + args.mutants
        (ROOT / "mutants").mkdir(exist_ok=True)
        with (ROOT / "mutants" / "mutmut.log").open("a") as log:
            result = subprocess.run(command, cwd=ROOT, env=environment(), stdout=log, stderr=log, check=False)
        if result.returncode != 0:
            sys.exit(f"make mutation: mutmut failed (exit {result.returncode}); its output: mutants/mutmut.log")
    if args.record:
        record(mutants())
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    sys.exit(
        report(
            mutants(),
            time.perf_counter() - started,
            usage.ru_utime + usage.ru_stime,
            (load, os.getloadavg()[0]),
            args.module,
        )
    )


if __name__ == "__main__":
    main()
