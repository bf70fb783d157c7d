"""The terravixens command: site validation and the list of layers, without tracebacks."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "terravixens.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_validate_accepts_the_example():
    result = cli("validate", "--site", "sites/example.yaml")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "sites/example.yaml: ok — site 'homelab', 3 hypervisors, 1 clusters, 5 nodes"


def test_validate_reports_every_problem_with_file_and_field(tmp_path):
    site = tmp_path / "site.yaml"
    site.write_text(
        (ROOT / "sites" / "example.yaml")
        .read_text()
        .replace("vm_id: 1102", "vm_id: 1101")
        .replace("hypervisor: pve2\n        vm_id: 1202", "hypervisor: pve9\n        vm_id: 1202")
    )
    result = cli("validate", "--site", str(site))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines[0] == f"{site}: 2 problems in the site file"
    assert (
        "  - line 99, clusters.prod.workers.wk-b.hypervisor: unknown hypervisor 'pve9': use one of pve1, pve2, pve3 "
        "or add it under 'hypervisors'"
    ) in lines
    assert (
        "  - line 67, clusters.prod.control_planes.cp-b.vm_id: VM id 1101 is already used by "
        "clusters.prod.control_planes.cp-a: give each VM its own id"
    ) in lines


def test_stacks_lists_layers_in_apply_order():
    result = cli("stacks", "--site", "sites/example.yaml")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["hypervisors", "platform-prod", "gitops-prod"]


def test_every_command_that_reads_a_site_reads_it_strictly(tmp_path):
    """validate, stacks and upgrade all go through the strict, bounded loader: a duplicate key is a located problem."""
    text = (ROOT / "sites" / "example.yaml").read_text()
    site = tmp_path / "site.yaml"
    site.write_text(
        text.replace("      wk-b:\n", "      wk-a:\n        hypervisor: pve1\n        vm_id: 1999\n      wk-b:\n")
    )
    first = text.splitlines().index("      wk-a:") + 1
    for command in (
        ["validate", "--site", str(site)],
        ["stacks", "--site", str(site)],
        ["upgrade", "prod", "--dry-run", "--site", str(site)],
    ):
        result = cli(*command)
        assert result.returncode == 2, (command, result.stdout, result.stderr)
        assert result.stdout == "" and "Traceback" not in result.stderr
        assert f"clusters.prod.workers.wk-a: appears twice in the same mapping (lines {first} and " in result.stderr


def test_an_ascii_only_terminal_gets_escapes_not_a_traceback():
    import os

    result = subprocess.run(
        [sys.executable, "-m", "terravixens.cli", "validate", "--site", "sites/example.yaml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, PYTHONIOENCODING="ascii"),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "sites/example.yaml: ok \\u2014 site 'homelab', 3 hypervisors, 1 clusters, 5 nodes"


def test_whole_number_options_say_the_minimum_and_why(capsys):
    """--worker-batch, --probes and --keep share one parser: each says what it counts, the minimum and why."""
    import pytest

    from terravixens import cli

    cases = [
        (["deploy", "--worker-batch", "0"], "'0' is not a batch size of workers: give a whole number, 1 or more"),
        (
            ["remove-dead-member", "prod", "cp-b", "--probes", "1"],
            (
                "'1' is not a number of probes: give a whole number, 2 or more (a single probe cannot tell a dead node "
                "from a reboot)"
            ),
        ),
        (
            ["snapshot", "prod", "--keep", "x"],
            "'x' is not a number of snapshots to keep: give a whole number, 1 or more (the new one is always kept)",
        ),
    ]
    for argv, message in cases:
        with pytest.raises(SystemExit) as stopped:
            cli.main(argv)
        assert stopped.value.code == 2
        assert capsys.readouterr().err.splitlines()[-1].endswith(message), argv
