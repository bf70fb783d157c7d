"""Every command works from the installed environment, from any folder, right after `make setup`.

The commands run as an operator runs them: the console scripts of the project's environment (the interpreter running
these tests), in a temporary folder, with no PYTHONPATH — so `terravixens` and the generated bindings (`imports`) are
found only if the installation provides them (the Makefile installs the package again once imports/ exists: the
editable finder maps only what existed at install time). The operations that synthesize run up to their first
external call: a stand-in Terraform answers `version` (cdktf checks it during synth) and fails everything else.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from terravixens.config.loader import DEFAULT_SITE

BIN = Path(sys.executable).parent
BROKEN = ("ImportError", "ModuleNotFoundError", "Traceback (most recent call last)")
STUB = """#!{python}
import json, os, sys
with open(os.environ["STUB_LOG"], "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
if sys.argv[1:2] in (["version"], ["-version"], ["-v"]):
    print(json.dumps({{"terraform_version": "1.11.4", "platform": "linux_amd64"}}) if "-json" in sys.argv
          else "Terraform v1.11.4")
    sys.exit(0)
print("stand-in terraform: no external call in this test", file=sys.stderr)
sys.exit(1)
"""


@pytest.fixture(scope="module")
def elsewhere(tmp_path_factory):
    """An empty folder outside the checkout, a stand-in Terraform, and an environment without PYTHONPATH."""
    folder = tmp_path_factory.mktemp("anywhere")
    stub = folder / "bin" / "terraform"
    stub.parent.mkdir()
    stub.write_text(STUB.format(python=sys.executable))
    stub.chmod(0o755)
    unset = ("PYTHONPATH", "TERRAVIXENS_SITE", "TF_VAR_terravixens_guarded")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env.update(
        TERRAFORM_BINARY_NAME=str(stub),
        TERRAVIXENS_TERRAFORM=str(stub),
        STUB_LOG=str(folder / "stub.log"),
        PATH=f"{stub.parent}{os.pathsep}{env['PATH']}",
    )
    return folder, env


def run(elsewhere, *argv: str) -> subprocess.CompletedProcess:
    folder, env = elsewhere
    (folder / "stub.log").unlink(missing_ok=True)
    result = subprocess.run(
        [str(BIN / argv[0]), *argv[1:]],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    for sign in BROKEN:
        assert sign not in result.stdout + result.stderr, (argv, result.stdout[-3000:], result.stderr[-3000:])
    return result


def stub_calls(elsewhere) -> list[list[str]]:
    log = elsewhere[0] / "stub.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_the_bindings_import_from_the_environment_outside_the_checkout(elsewhere):
    folder, env = elsewhere
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            (
                "import terravixens._bindings.proxmox.provider, terravixens._bindings.talos.provider, "
                "terravixens._bindings.helm.provider, terravixens._bindings.kubernetes.provider, terravixens.stacks; "
                "print('ok')"
            ),
        ],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-3000:]


def commands(elsewhere) -> list[list[str]]:
    """Every command and sub-command, from `terravixens --help` (a new command is covered without editing this)."""

    def listed(*argv: str) -> list[str]:
        usage = run(elsewhere, "terravixens", *argv, "--help").stdout
        return re.search(r"\{([a-z,-]+)\}", usage).group(1).split(",")

    found = []
    for command in listed():
        nested = run(elsewhere, "terravixens", command, "--help").stdout
        if re.search(r"\{[a-z,-]+\}", nested.split("\n\n")[0]):
            found += [[command, sub] for sub in listed(command)]
        else:
            found.append([command])
    return found


def test_every_command_answers_help_from_any_folder(elsewhere):
    found = commands(elsewhere)
    assert ["deploy"] in found and ["drift"] in found and ["spec", "serve"] in found and len(found) >= 15
    for command in found:
        result = run(elsewhere, "terravixens", *command, "--help")
        assert result.returncode == 0 and "usage: terravixens" in result.stdout, command


def test_validate_and_stacks_from_any_folder(elsewhere):
    validate = run(elsewhere, "terravixens", "validate", str(DEFAULT_SITE))
    assert validate.returncode == 0, validate.stderr
    stacks = run(elsewhere, "terravixens", "stacks", str(DEFAULT_SITE))
    assert stacks.returncode == 0 and stacks.stdout.split() == ["hypervisors", "platform-prod", "gitops-prod"]


@pytest.mark.parametrize(
    "argv, code, first",
    [
        (["drift", "hypervisors"], 1, "init"),
        (["deploy", "hypervisors", "--yes"], 4, "init"),
        (["destroy", "hypervisors", "--confirm", "homelab/hypervisors"], 4, "init"),
    ],
)
def test_operations_synthesize_then_reach_terraform_from_any_folder(elsewhere, argv, code, first):
    """Synth (the bindings imported, every stack built) then the first Terraform call, which the stand-in fails."""
    result = run(elsewhere, "terravixens", argv[0], "--site", str(DEFAULT_SITE), *argv[1:])
    assert result.returncode == code, (result.stdout[-2000:], result.stderr[-2000:])
    assert f"terraform {first} failed" in result.stderr and "stand-in terraform" in result.stderr
    assert (elsewhere[0] / "cdktf.out" / "stacks" / "hypervisors" / "cdk.tf.json").is_file()
    assert [call[0] for call in stub_calls(elsewhere) if call[0] not in ("version", "-version", "-v")][:1] == [first]


def test_the_wrapper_cdktf_runs_is_installed_and_passes_through(elsewhere):
    result = run(elsewhere, "terravixens-terraform", "version", "-json")
    assert result.returncode == 0 and json.loads(result.stdout)["terraform_version"] == "1.11.4"
    assert stub_calls(elsewhere) == [["version", "-json"]]
