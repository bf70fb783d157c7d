"""What the Talos validators cost (ADR 0014): cold builds, the warm `make tools` no-op, and one validation run.

    pipenv run python benchmarks/talos_validate.py [--cold] [--runs 3]

--cold builds every tool binary once more into a temporary folder with an empty GOCACHE (the Go build cache; the
module cache stays as it is, so downloads are not counted), one after the other. The validation run judges every
node of every conformance site variant with the tool of its Talos minor, as tests/test_talos_validate.py does.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("JSII_NODE", str(ROOT / "node_modules" / ".bin" / "node"))
os.environ.setdefault("NODE_OPTIONS", "--disable-warning=DEP0044")

from tests import support, talos_tool  # noqa: E402
from tests.test_conformance import VARIANTS, _variant  # noqa: E402


def timed(command: list[str], **options) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, **options)
    return time.perf_counter() - started


def cold_builds() -> None:
    for minor in talos_tool.supported_minors():
        with tempfile.TemporaryDirectory(prefix="tv-gocache-") as cache, tempfile.TemporaryDirectory() as out:
            seconds = timed(
                [
                    "go",
                    "build",
                    "-mod=readonly",
                    "-trimpath",
                    "-buildvcs=false",
                    f"-modfile=go.v{minor}.mod",
                    "-o",
                    f"{out}/tool",
                    ".",
                ],
                cwd=talos_tool.TOOL_DIR,
                env={**os.environ, "GOCACHE": cache, "GOTOOLCHAIN": "local"},
            )
        print(f"cold build v{minor} ({talos_tool.pinned_machinery(minor)}): {seconds:6.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cold", action="store_true", help="also time cold builds (minutes)")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}, "
        f"{subprocess.run(['go', 'version'], capture_output=True, text=True).stdout.strip()}"
    )
    if args.cold:
        cold_builds()
    no_op = [timed(["make", "--no-print-directory", "tools"], cwd=ROOT) for _ in range(args.runs)]
    print(f"make tools, nothing to do: median {statistics.median(no_op) * 1000:.0f} ms")
    nodes = []
    for name in sorted(VARIANTS):
        stacks = support.synth(support.site_from(_variant(VARIANTS[name])))
        nodes += [{**node, "name": f"{name}:{node['name']}"} for node in talos_tool.requests(stacks)]
    for minor, group in sorted(talos_tool.by_minor(nodes).items()):
        runs = []
        for _ in range(args.runs):
            started = time.perf_counter()
            report = talos_tool.validate(minor, group)
            runs.append(time.perf_counter() - started)
            assert all(verdict.ok for verdict in report.verdicts)
        print(
            f"validate {len(group)} node configurations of {len(VARIANTS)} sites with {report.machinery}: "
            f"median {statistics.median(runs):.2f} s ({statistics.median(runs) / len(group) * 1000:.0f} ms each)"
        )


if __name__ == "__main__":
    main()
