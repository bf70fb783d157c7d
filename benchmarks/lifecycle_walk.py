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
from tests.test_lifecycle_walk import BUDGET, RULES_RUN, Walk  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--walks", type=int, default=BUDGET.max_examples)
    parser.add_argument("--steps", type=int, default=BUDGET.stateful_step_count)
    args = parser.parse_args()
    load = os.getloadavg()
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores; Python {platform.python_version()}; load average "
        f"{load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f} at start"
    )
    started = time.perf_counter()
    run_state_machine_as_test(Walk, settings=settings(BUDGET, max_examples=args.walks, stateful_step_count=args.steps))
    lifecycle.validate_queued()  # as the test does: one batch per Talos minor after the walks
    wall = time.perf_counter() - started
    steps = sum(RULES_RUN.values())
    seconds = lifecycle.SECONDS
    print(f"walks: {args.walks} of up to {args.steps} steps; {steps} steps in {wall:.1f} s: {steps / wall:.2f} steps/s")
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
