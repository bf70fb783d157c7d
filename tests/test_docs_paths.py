"""No absolute path of the machine a command ran on in the docs, the README or a benchmark's report: a reader has
none of them (docs/commands.md pastes real outputs; examples use the files the repository ships, docs/examples/)."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from tests.machine_paths import machine_paths

ROOT = Path(__file__).resolve().parent.parent


def documents() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "README.md", "docs"], cwd=ROOT, capture_output=True, text=True)
    names = (
        listed.stdout.split()
        if listed.returncode == 0 and listed.stdout.strip()
        else [str(path.relative_to(ROOT)) for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*"))]]
    )
    return [ROOT / name for name in names if (ROOT / name).is_file() and not (ROOT / name).is_symlink()]


def test_no_machine_path_in_the_docs():
    found = {str(path.relative_to(ROOT)): machine_paths(path.read_text(errors="replace")) for path in documents()}
    assert {name: paths for name, paths in found.items() if paths} == {}


def test_the_check_finds_what_it_looks_for():
    assert machine_paths("Python 3.11.7 (/work/main/.venv/bin/python); kept in /tmp/tv-fuzz-x/slowest.yaml") == [
        "/work/main/.venv/bin/python",
        "/tmp/tv-fuzz-x/slowest.yaml",
    ]
    assert machine_paths(f"secrets checked ({ROOT}/docs/examples/lab-secrets.yaml)") != []
    assert machine_paths("agent: /home/ops/.ssh is a symbolic link; kept in /home/alice/src") == ["/home/alice/src"]
    assert (
        machine_paths(
            "TERRAVIXENS_CA_FILE=/etc/terravixens/ca.pem; '${file(\"/proc/self/environ\")}' "
            "$TMPDIR/tv-fuzz-x ~/.cache/terravixens .venv/bin/python /dev/sda"
        )
        == []
    )


def test_benchmarks_name_paths_as_a_reader_sees_them(tmp_path):
    from benchmarks.paths import scrubbed, shown

    assert shown(ROOT / ".venv" / "bin" / "python") == ".venv/bin/python"
    assert shown(Path(tempfile.gettempdir()) / "tv-cold-x" / "repo") == "$TMPDIR/tv-cold-x/repo"
    assert shown(Path.home() / ".cache" / "terravixens") in ("~/.cache/terravixens", ".cache/terravixens")
    assert shown("/opt/python/bin/python3.11") == "python3.11"
    scratch = tmp_path / "scratch"
    text = f"[providers] providers in mirror {scratch}/caches/terravixens/mirror; checkout {ROOT}/imports"
    assert (
        scrubbed(text, SCRATCH=scratch)
        == "[providers] providers in mirror $SCRATCH/caches/terravixens/mirror; checkout ./imports"
    )
    assert machine_paths(scrubbed(text, SCRATCH=scratch)) == []
