"""The operations' command line: bad input and missing confirmations stop before anything runs, with their exit
codes (docs/commands.md) and no traceback."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SITE = str(ROOT / "sites" / "example.yaml")


def cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "terravixens.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


def test_deploy_unknown_layer_is_bad_input(tmp_path):
    result = cli("deploy", "platform-nowhere", "--site", SITE, cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip() == ("terravixens deploy: unknown layer 'platform-nowhere': use one of hypervisors, "
                                     "platform-prod, gitops-prod")


def test_destroy_without_a_terminal_needs_the_typed_confirmation(tmp_path):
    result = cli("destroy", "hypervisors", "--site", SITE, cwd=tmp_path)
    assert result.returncode == 3
    assert "no terminal to confirm on: pass --confirm homelab/hypervisors" in result.stderr
    wrong = cli("destroy", "hypervisors", "--site", SITE, "--confirm", "homelab/platform-prod", cwd=tmp_path)
    assert wrong.returncode == 3
    assert "confirmation 'homelab/platform-prod' is not 'homelab/hypervisors': nothing was destroyed" in wrong.stderr
    assert not (tmp_path / "cdktf.out").exists() and not (tmp_path / "state-backups").exists()


def test_decommission_unknown_cluster_and_bad_site(tmp_path):
    result = cli("decommission", "staging", "--site", SITE, cwd=tmp_path)
    assert result.returncode == 2 and "unknown cluster 'staging': use one of prod" in result.stderr
    broken = tmp_path / "broken.yaml"
    broken.write_text("site: Not A Name\n")
    bad = cli("deploy", "--site", str(broken), cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.startswith(f"{broken}: ") and "Traceback" not in bad.stderr


def test_review_needs_a_base_or_two_directories(tmp_path):
    assert cli("review", cwd=tmp_path).returncode == 2
    result = cli("review", "--before", str(tmp_path), cwd=tmp_path)
    assert result.returncode == 2 and "give BASE, or both --before and --after" in result.stderr


def test_drift_exits_1_on_any_error_so_that_2_always_means_drift(tmp_path):
    unknown = cli("drift", "platform-nowhere", "--site", SITE, cwd=tmp_path)
    assert unknown.returncode == 1 and "Traceback" not in unknown.stderr
    assert unknown.stderr.strip() == ("terravixens drift: unknown layer 'platform-nowhere': use one of hypervisors, "
                                      "platform-prod, gitops-prod")
    broken = tmp_path / "broken.yaml"
    broken.write_text("site: Not A Name\n")
    bad = cli("drift", "--site", str(broken), cwd=tmp_path)
    assert bad.returncode == 1 and bad.stderr.startswith(f"{broken}: ") and "Traceback" not in bad.stderr
    assert not (tmp_path / "cdktf.out").exists()
