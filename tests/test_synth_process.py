"""The app's process (main.py) runs one synth and exits: its collector is off and what is alive is frozen at exit
(terravixens.synth.one_synth_process, ADR 0057); the library never touches the collector of a process that uses it."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Registered before main.py runs, so atexit runs it last: after main.py's own exit handler (and jsii's, if started).
AT_EXIT_PROBE = """
import atexit, gc, runpy, sys
atexit.register(lambda: print("collector", gc.isenabled(), "frozen", gc.get_freeze_count(), flush=True))
sys.argv = ["main.py"]
runpy.run_path("main.py", run_name="__main__")
"""


def test_main_turns_the_collector_off_and_freezes_what_is_alive_at_exit(tmp_path):
    bad = tmp_path / "bad.yaml"  # stops at the site file: no jsii runtime needed to see the process' settings
    bad.write_text("site: Bad_Name\nproxmox: {endpoint: https://127.0.0.1:8006/}\nhypervisors: {}\n")
    env = dict(os.environ, CDKTF_OUTDIR=str(tmp_path / "out"), TERRAVIXENS_SITE=str(bad))
    result = subprocess.run(
        [sys.executable, "-c", AT_EXIT_PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    words = result.stdout.split()
    assert words[:3] == ["collector", "False", "frozen"], result.stdout
    assert int(words[3]) > 10_000  # the library and pydantic's models, at least


def test_the_library_leaves_the_collector_alone():
    import terravixens.stacks
    import terravixens.synth

    assert terravixens.stacks and terravixens.synth
    assert gc.isenabled()
