"""cdktf and jsii on the project's Node.js 22, quietly, in a new shell (issue 18, item 4; ADR 0049).

What a real system adds: an older system Node first on PATH (Node 20 on this machine prints jsii's end-of-life banner
under every synth); the checks below run in a shell whose PATH is only /usr/bin:/bin (+ Terraform's folder, which
cdktf runs for its version during synth), so the system's `node` is the one a careless launcher would find.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from terravixens.nodejs import QUIET, jsii_environment, project_node

ROOT = Path(__file__).resolve().parent.parent
NOISE = ("end-of-life", "DEP0044", "b'", "[ERROR]", "DeprecationWarning")


def fake_checkout(folder: Path) -> Path:
    """bin/ and scripts/node-env.sh of this checkout, with a node_modules whose `node` prints its environment and
    arguments as JSON and whose `cdktf` is never run by node itself (the fake node stands in for both)."""
    for name in ("bin/terravixens", "bin/cdktf", "scripts/node-env.sh"):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, folder / name)
    tools = folder / "node_modules" / ".bin"
    tools.mkdir(parents=True)
    (tools / "node").write_text(
        "#!/usr/bin/python3\nimport json, os, sys\nprint(json.dumps({'argv': sys.argv[1:], 'env': dict(os.environ)}))\n"
    )
    (tools / "cdktf").write_text("#!/bin/sh\necho 'cdktf must run through node_modules/.bin/node' >&2; exit 9\n")
    for tool in tools.iterdir():
        tool.chmod(0o755)
    return folder


def new_shell(home: Path, **extra: str) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8", **extra}


def cdktf(folder: Path, *argv: str, **extra: str) -> dict:
    result = subprocess.run(
        [str(folder / "bin" / "cdktf"), *argv],
        env=new_shell(folder, **extra),
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_bin_cdktf_runs_the_project_cdktf_on_the_project_node_with_what_npmrc_gives(tmp_path):
    folder = fake_checkout(tmp_path)
    seen = cdktf(folder, "synth", "--hide-diagnostics=false")
    env = seen["env"]
    assert seen["argv"] == [str(folder / "node_modules/.bin/cdktf"), "synth", "--hide-diagnostics=false"]
    assert env["PATH"].split(":")[0] == str(folder / "node_modules/.bin")
    assert env["JSII_NODE"] == str(folder / "node_modules/.bin/node")
    assert env["NODE_OPTIONS"].split() == [QUIET, "--max-old-space-size=8192"]
    assert env["CHECKPOINT_DISABLE"] == "1" and env["DISABLE_VERSION_CHECK"] == "1"
    assert env["TERRAFORM_BINARY_NAME"] == str(folder / "scripts/terravixens-terraform")
    assert "TERRAVIXENS_TERRAFORM" not in env


def test_bin_cdktf_keeps_the_operators_options_and_terraform(tmp_path):
    folder = fake_checkout(tmp_path)
    env = cdktf(
        folder, "diff", NODE_OPTIONS="--max-old-space-size=1024", TERRAFORM_BINARY_NAME="tofu", CHECKPOINT_DISABLE="0"
    )["env"]
    assert env["NODE_OPTIONS"].split() == ["--max-old-space-size=1024", QUIET]
    assert env["TERRAFORM_BINARY_NAME"] == str(folder / "scripts/terravixens-terraform")
    assert env["TERRAVIXENS_TERRAFORM"] == "tofu" and env["CHECKPOINT_DISABLE"] == "0"


@pytest.mark.parametrize("command", ["deploy", "destroy"])
def test_bin_cdktf_without_a_terminal_stops_before_cdktf_with_one_line(tmp_path, command):
    """Ink's raw mode crashes without a TTY: without --auto-approve nothing starts (the fake node would print)."""
    folder = fake_checkout(tmp_path)
    result = subprocess.run(
        [str(folder / "bin" / "cdktf"), command, "hypervisors"],
        env=new_shell(folder),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (
        f"cdktf {command}: no terminal to approve on (cdktf's prompt would crash): add --auto-approve (the plan guard "
        f"and the state backup still run), or use `bin/terravixens {command} ...`\n"
    )
    approved = cdktf(folder, command, "hypervisors", "--auto-approve")
    assert approved["argv"][1:] == [command, "hypervisors", "--auto-approve"]


def test_bin_terravixens_puts_the_project_node_first(tmp_path):
    folder = fake_checkout(tmp_path)
    venv = folder / ".venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "terravixens").write_text('#!/bin/sh\necho "$PATH|$JSII_NODE|$NODE_OPTIONS|$*"\n')
    (venv / "terravixens").chmod(0o755)
    result = subprocess.run(
        [str(folder / "bin" / "terravixens"), "validate", "x y"], env=new_shell(folder), capture_output=True, text=True
    )
    path, node, options, argv = result.stdout.rstrip("\n").split("|")
    assert path.split(":")[0] == str(folder / "node_modules/.bin") and node == str(folder / "node_modules/.bin/node")
    assert options == QUIET and argv == "validate x y"


def test_jsii_environment(tmp_path):
    checkout = fake_checkout(tmp_path / "checkout")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    node = str(checkout / "node_modules/.bin/node")
    assert project_node(elsewhere, checkout) == Path(node)
    assert jsii_environment({}, elsewhere, checkout) == {"JSII_NODE": node, "NODE_OPTIONS": QUIET}
    assert jsii_environment({"NODE_OPTIONS": "--x"}, elsewhere, checkout)["NODE_OPTIONS"] == f"--x {QUIET}"
    assert jsii_environment({"NODE_OPTIONS": QUIET}, elsewhere, checkout)["NODE_OPTIONS"] == QUIET
    assert jsii_environment({"JSII_NODE": "/opt/node"}, elsewhere, checkout) == {}
    assert jsii_environment({}, elsewhere, elsewhere) == {}  # an installed wheel: no project Node, nothing changed
    own = fake_checkout(tmp_path / "site-repo")  # the current folder's toolchain first
    assert project_node(own, checkout) == own / "node_modules/.bin/node"


def terraform_folder() -> str:
    found = shutil.which("terraform")
    # A prerequisite (README): cdktf runs it during synth. Missing, the test fails rather than proving nothing.
    assert found is not None, "no terraform on PATH: install Terraform (README's prerequisites)"
    return str(Path(found).parent)


def test_a_real_synth_through_bin_cdktf_in_a_new_shell_is_quiet(tmp_path):
    """The real cdktf 0.21 and the app through `.venv/bin/python -O main.py`, output elsewhere (-o)."""
    env = new_shell(tmp_path)
    env["PATH"] = f"{env['PATH']}:{terraform_folder()}"
    result = subprocess.run(
        [str(ROOT / "bin" / "cdktf"), "synth", "--output", str(tmp_path / "out")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    said = result.stdout + result.stderr
    assert result.returncode == 0, said[-3000:]
    assert "Generated Terraform code for the stacks" in said
    assert [noise for noise in NOISE if noise in said] == [], said[-3000:]
    assert (tmp_path / "out" / "stacks" / "hypervisors" / "cdk.tf.json").is_file()


def test_terravixens_run_directly_synthesizes_on_the_project_node(tmp_path):
    """`.venv/bin/terravixens` without the launcher, the system Node first on PATH: terravixens.nodejs picks the
    project's (a stand-in Terraform fails the first call after the synth)."""
    stub = tmp_path / "bin" / "terraform"
    stub.parent.mkdir()
    stub.write_text(
        '#!/bin/sh\n[ "$1" = version ] && { echo \'{"terraform_version": "1.11.4"}\'; exit 0; }\n'
        "echo 'stand-in terraform' >&2; exit 1\n"
    )
    stub.chmod(0o755)
    env = new_shell(tmp_path, TERRAFORM_BINARY_NAME=str(stub), TERRAVIXENS_TERRAFORM=str(stub))
    if shutil.which("node", path=env["PATH"]):
        assert os.path.realpath(shutil.which("node", path=env["PATH"]) or "") != str(
            ROOT / "node_modules/node/bin/node"
        )
    result = subprocess.run(
        [
            str(ROOT / ".venv" / "bin" / "terravixens"),
            "drift",
            "hypervisors",
            "--site",
            str(ROOT / "sites/example.yaml"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    said = result.stdout + result.stderr
    assert "stand-in terraform" in said and (tmp_path / "cdktf.out" / "stacks" / "hypervisors").is_dir(), said[-3000:]
    assert [noise for noise in NOISE if noise in said] == [], said[-3000:]
