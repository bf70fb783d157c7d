"""A pytest plugin for `make mutation` (scripts/mutation.py), loaded with `-p tests.mutation_plugin` after
`-p tests.mutation_fork`. It acts only while mutmut runs the tests (`MUTANT_UNDER_TEST` is set).

While mutmut traces which functions each test calls (`MUTANT_UNDER_TEST=stats`):
- **Fixture credit.** A module-, class- or session-scoped fixture (the example's synth) runs once, inside the first
  test that asks for it, and mutmut credits only that test with the functions it called: a mutant of a construct
  would never run against the other tests that read what the fixture built. The plugin records what each shared
  fixture called and credits every test whose fixture closure holds it.
- **Cost.** mutmut times a test's call only. The plugin adds its own setup and teardown and the setup of every shared
  fixture in its closure (what the test costs when it runs first in a fork, as it does for a mutant): mutmut runs
  the cheapest mutants and tests first and derives its timeouts from these times.

While a mutant runs (a forked process, `MUTANT_UNDER_TEST=<mutant>`):
- **A CPU-time limit per test**: FACTOR times its traced cost plus SLACK seconds (a hang is stopped in about the
  time the test takes, not in mutmut's limit for all of the mutant's tests); SIGXCPU ends the process and mutmut
  records a timeout.
- **The killing test**: the first test that fails is appended to `$TV_MUTATION_KILLS` (mutant, test, phase).
"""

from __future__ import annotations

import os
import resource
import time
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest

FACTOR = 10.0  # a mutant's test may take ten times what it took unmutated (a loaded machine, a cold kernel)...
SLACK = 20.0  # ...plus 20 s of CPU (a fork starts a Node.js process and synthesizes cold)
NOT_A_MUTANT = {"", "stats", "fail", "list_all_tests", "mutant_generation"}

_called_by_fixture: dict[Any, set[str]] = defaultdict(set)  # shared FixtureDef -> functions its setup called
_fixture_seconds: dict[Any, float] = defaultdict(float)  # shared FixtureDef -> seconds its setup took
_in_setup = [0.0]  # seconds of shared fixtures set up during the current test's setup
_limit: list[int] = []  # mutmut's own soft CPU limit for the whole mutant, read once


def _under_test() -> str:
    from mutmut.mutation.trampoline import get_mutant_under_test

    return get_mutant_under_test()


def _shared_fixtures(item: pytest.Item) -> Iterator[Any]:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return
    for name in info.names_closure:
        for fixturedef in info.name2fixturedefs.get(name, ()):
            if fixturedef.scope != "function":
                yield fixturedef


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef: Any, request: pytest.FixtureRequest) -> Iterator[None]:
    if fixturedef.scope == "function" or os.environ.get("MUTANT_UNDER_TEST") != "stats":
        yield
        return
    from mutmut.state import state

    outer = state()._stats
    inner: set[str] = set()
    state()._stats = inner
    started = time.perf_counter()
    try:
        yield
    finally:
        seconds = time.perf_counter() - started
        _fixture_seconds[fixturedef] += seconds
        _in_setup[0] += seconds
        _called_by_fixture[fixturedef] |= inner
        outer |= inner
        state()._stats = outer


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logstart(nodeid: str, location: Any) -> None:
    _in_setup[0] = 0.0


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Before mutmut hands this test the functions called since it started: those of its shared fixtures too."""
    if os.environ.get("MUTANT_UNDER_TEST") != "stats":
        return
    from mutmut.state import state

    for fixturedef in _shared_fixtures(item):
        state()._stats |= _called_by_fixture.get(fixturedef, set())


def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> None:
    if call.when == "call" or os.environ.get("MUTANT_UNDER_TEST") != "stats":
        return
    from mutmut.state import state

    durations = state().duration_by_test
    if call.when == "setup":
        durations[item.nodeid] += max(call.duration - _in_setup[0], 0.0)
    else:  # teardown: the test is done, every fixture it uses has been set up and timed
        durations[item.nodeid] += call.duration + sum(_fixture_seconds.get(f, 0.0) for f in _shared_fixtures(item))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if _under_test() in NOT_A_MUTANT:
        return
    from mutmut.state import state

    soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if not _limit:
        _limit.append(soft)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    budget = FACTOR * state().duration_by_test.get(item.nodeid, 0.0) + SLACK
    limit = int(usage.ru_utime + usage.ru_stime + budget) + 1
    if _limit[0] != resource.RLIM_INFINITY:
        limit = min(limit, _limit[0])
    resource.setrlimit(resource.RLIMIT_CPU, (limit, hard))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path = os.environ.get("TV_MUTATION_KILLS")
    if not report.failed or not path:
        return
    mutant = _under_test()
    if mutant in NOT_A_MUTANT:
        return
    with open(path, "a") as out:  # one short line per write: appends from concurrent forks do not interleave
        out.write(f"{mutant}\t{report.nodeid}\t{report.when}\n")


def pytest_unconfigure(config: pytest.Config) -> None:
    """A mutant's cost: CPU seconds of this fork (with the processes its tests waited for, as `terravixens.cli` in a
    subprocess) and of its kernel (Node.js) since the fork, appended to $TV_MUTATION_COST."""
    path = os.environ.get("TV_MUTATION_COST")
    mutant = _under_test()
    if not path or mutant in NOT_A_MUTANT:
        return
    from tests.mutation_fork import kernel_seconds

    seconds = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):  # the fork and what its tests ran and waited for
        usage = resource.getrusage(who)
        seconds += usage.ru_utime + usage.ru_stime
    with open(path, "a") as out:
        out.write(f"{mutant}\t{seconds:.3f}\t{kernel_seconds():.3f}\n")
