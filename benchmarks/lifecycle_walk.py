"""Steps per second of the lifecycle walk (tests/test_lifecycle_walk.py, issue 21), and where the time goes.

    pipenv run python benchmarks/lifecycle_walk.py [--walks 20] [--steps 8]

Runs the state machine as `make test` does (derandomized: the same walks every run) and prints the steps taken, the
wall time, steps per second, and the seconds spent in synth (app.synth() of the whole site, in process), in judging
each difference (diff, invariants, the plan guard and deploy's sequence) and in Talos' validator. The machine's load
average is printed first: the figure depends on what else runs.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("JSII_NODE", str(ROOT / "node_modules" / ".bin" / "node"))
os.environ.setdefault("NODE_OPTIONS", "--disable-warning=DEP0044")

from hypothesis import settings  # noqa: E402
from hypothesis.stateful import run_state_machine_as_test  # noqa: E402

from tests import lifecycle  # noqa: E402
from tests.test_lifecycle_walk import (  # noqa: E402
    BUDGET,
    GROWING_BUDGET,
    LARGE_BUDGET,
    RULES_RUN,
    WALKS,
    GrowingWalk,
    LargeWalk,
    Walk,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--walks", type=int, default=BUDGET.max_examples, help="walks from the example's size")
    parser.add_argument("--steps", type=int, default=BUDGET.stateful_step_count)
    parser.add_argument("--large", type=int, default=LARGE_BUDGET.max_examples, help="walks from 3+20 and 5+50 nodes")
    parser.add_argument("--growing", type=int, default=GROWING_BUDGET.max_examples, help="walks growing a cluster")
    args = parser.parse_args()
    load = os.getloadavg()
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores; Python {platform.python_version()}; load average "
        f"{load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f} at start"
    )
    started = time.perf_counter()
    runs = [
        (Walk, args.walks, settings(BUDGET, stateful_step_count=args.steps)),
        (LargeWalk, args.large, settings(LARGE_BUDGET, stateful_step_count=args.steps)),
        (GrowingWalk, args.growing, GROWING_BUDGET),
    ]
    for machine, walks, config in runs:
        if walks:
            run_state_machine_as_test(machine, settings=settings(config, max_examples=walks))
    lifecycle.validate_queued()  # as the test does: one batch per Talos minor after the walks
    wall = time.perf_counter() - started
    steps = sum(RULES_RUN.values())
    seconds = lifecycle.SECONDS
    kinds = ", ".join(f"{n} {m.__name__} (up to {c.stateful_step_count} steps)" for m, n, c in runs)
    print(f"walks: {kinds}; {steps} steps in {wall:.1f} s: {steps / wall:.2f} steps/s")
    largest = max((p + w, p, w) for _, sizes in WALKS for p, w in sizes)
    print(f"largest site: {largest[1]} control planes + {largest[2]} workers")
    print(
        f"synth: {lifecycle.SYNTHS['synth']} (+{lifecycle.SYNTHS['cached']} cached), {seconds['synth']:.1f} s "
        f"({seconds['synth'] / max(lifecycle.SYNTHS['synth'], 1):.2f} s each); judge: {seconds['judge']:.1f} s "
        f"({seconds['judge'] / max(steps, 1) * 1000:.0f} ms a step); Talos validator: {seconds['validate']:.1f} s for "
        f"{len(lifecycle.VALIDATED_KEYS)} configurations"
    )
    print(f"rules taken: {', '.join(f'{name} {count}' for name, count in sorted(RULES_RUN.items()))}")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
