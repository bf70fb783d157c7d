"""Every command works from the installed environment, from any folder, right after `make setup`.

The commands run as an operator runs them: the console scripts of the project's environment (the interpreter running
these tests), in a temporary folder, with no PYTHONPATH — so `terravixens` and the generated bindings (`imports`) are
found only if the installation provides them (the Makefile installs the package again once imports/ exists: the
editable finder maps only what existed at install time). The operations that synthesize run up to their first
external call: a stand-in Terraform answers `version` and fails everything else.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from terravixens.config.loader import DEFAULT_SITE
from tests.fake_terraform import OPERATOR_CREDENTIALS
from tests.support import EXAMPLE_SITE

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
        **OPERATOR_CREDENTIALS,  # the operations check them before Terraform runs
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
    validate = run(elsewhere, "terravixens", "validate", str(EXAMPLE_SITE))
    assert validate.returncode == 0, validate.stderr
    stacks = run(elsewhere, "terravixens", "stacks", str(EXAMPLE_SITE))
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
    result = run(elsewhere, "terravixens", argv[0], "--site", str(EXAMPLE_SITE), *argv[1:])
    assert result.returncode == code, (result.stdout[-2000:], result.stderr[-2000:])
    assert f"terraform {first} failed" in result.stderr and "stand-in terraform" in result.stderr
    assert (elsewhere[0] / "cdktf.out" / "stacks" / "hypervisors" / "cdk.tf.json").is_file()
    assert [call[0] for call in stub_calls(elsewhere) if call[0] not in ("version", "-version", "-v")][:1] == [first]


def test_the_wrapper_cdktf_runs_is_installed_and_passes_through(elsewhere):
    result = run(elsewhere, "terravixens-terraform", "version", "-json")
    assert result.returncode == 0 and json.loads(result.stdout)["terraform_version"] == "1.11.4"
    assert stub_calls(elsewhere) == [["version", "-json"]]


# --- The wheel and the bindings' namespace (ADR 0041) -------------------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent
PROVIDERS = ("proxmox", "talos", "helm", "kubernetes")


def project_copy(folder: Path, with_bindings: bool) -> Path:
    """What a wheel is built from (pyproject.toml, its backend, README.md, cdktf.json, the package), in `folder`."""
    (folder / "scripts").mkdir(parents=True)
    for name in ("pyproject.toml", "README.md", "cdktf.json", "scripts/build_backend.py"):
        (folder / name).write_bytes((ROOT / name).read_bytes())
    skipped = ["__pycache__", "*.pyc"] + ([] if with_bindings else ["_bindings"])
    shutil.copytree(ROOT / "terravixens", folder / "terravixens", ignore=shutil.ignore_patterns(*skipped))
    return folder


def build_wheel(folder: Path) -> subprocess.CompletedProcess:
    """pip's own wheel build through pyproject.toml's backend (the environment's setuptools: no download)."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-w",
            "dist",
            ".",
        ],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=600,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )


@pytest.fixture(scope="module")
def wheel_names(tmp_path_factory) -> list[str]:
    folder = project_copy(tmp_path_factory.mktemp("wheel"), with_bindings=True)
    built = build_wheel(folder)
    assert built.returncode == 0, built.stderr[-3000:]
    [wheel] = (folder / "dist").glob("terravixens-*.whl")
    return zipfile.ZipFile(wheel).namelist()


def test_the_wheel_ships_the_bindings_inside_the_package_and_no_top_level_imports(wheel_names):
    tops = {name.split("/")[0] for name in wheel_names}
    assert tops == {"terravixens", "terravixens-0.1.0.dist-info"}, tops
    for provider in PROVIDERS:
        assert f"terravixens/_bindings/{provider}/__init__.py" in wheel_names
        assert f"terravixens/_bindings/{provider}/_jsii/{provider}@0.0.0.jsii.tgz" in wheel_names
        assert f"terravixens/_bindings/{provider}/provider/__init__.py" in wheel_names


def test_a_wheel_without_the_bindings_fails_with_the_command_to_run(tmp_path):
    built = build_wheel(project_copy(tmp_path, with_bindings=False))
    assert built.returncode != 0 and not list((tmp_path / "dist").glob("*.whl"))
    assert (
        "terravixens: no generated provider bindings in terravixens/_bindings/ for proxmox, talos, helm, kubernetes: "
        "run `make setup` (or `python3 scripts/providers.py bindings`) in the checkout before building a wheel"
    ) in built.stderr
    assert "Traceback" not in built.stderr


def test_the_backend_names_only_the_providers_missing(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import build_backend
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    assert build_backend.missing_bindings(ROOT) == []
    folder = project_copy(tmp_path, with_bindings=False)
    (folder / "terravixens" / "_bindings" / "talos").mkdir(parents=True)
    (folder / "terravixens" / "_bindings" / "talos" / "__init__.py").write_text("")
    assert build_backend.missing_bindings(folder) == ["proxmox", "helm", "kubernetes"]


def test_a_projects_own_imports_package_cannot_hide_ours(elsewhere, tmp_path):
    """Every cdktf project has an imports/ of its own: run from such a folder (first on sys.path, as `python -c` and
    `python main.py` put it), the library's constructs still find their bindings, and the project's stays its own."""
    env = elsewhere[1]
    project = tmp_path / "my-cdktf-project"
    (project / "imports" / "proxmox").mkdir(parents=True)
    (project / "imports" / "__init__.py").write_text("MINE = True\n")
    (project / "imports" / "proxmox" / "__init__.py").write_text("raise ImportError('the project imports/ was used')\n")
    code = (
        "import imports, terravixens.stacks, terravixens._bindings.proxmox.provider as p; "
        "from terravixens.config.loader import load_site; from terravixens.stacks import build_app; "
        f"build_app(load_site({str(EXAMPLE_SITE)!r}), 'out'); "
        "print(imports.MINE, p.__name__)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=project, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["True", "terravixens._bindings.proxmox.provider"]


def test_spec_serve_without_the_serve_extra_names_the_pip_command(elsewhere):
    """`uvicorn` (or Starlette) hidden as if the `serve` extra were not installed: one line, exit 2, no traceback."""
    folder, env = elsewhere
    for missing in ("uvicorn", "starlette"):
        code = (
            f"import sys; sys.modules[{missing!r}] = None; from terravixens.cli import main; "
            "sys.exit(main(['spec', 'serve', '--secrets', 'secrets.yaml']))"
        )
        result = subprocess.run(
            [sys.executable, "-c", code], cwd=folder, env=env, capture_output=True, text=True, timeout=300
        )
        assert result.returncode == 2, (result.stdout, result.stderr)
        assert result.stderr == f"spec serve: {missing} is not installed: pip install 'terravixens[serve]'\n"


def test_the_default_site_is_relative_to_the_current_folder(elsewhere, tmp_path):
    """Never sites/example.yaml beside the installed package (site-packages): the current folder's, or an error
    naming it and the fix."""

    assert not DEFAULT_SITE.is_absolute() and Path("sites", "example.yaml") == DEFAULT_SITE
    env = {k: v for k, v in elsewhere[1].items() if k != "TERRAVIXENS_SITE"}
    absent = subprocess.run(
        [str(BIN / "terravixens"), "validate"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert absent.returncode == 2 and "site-packages" not in absent.stderr
    assert absent.stderr.startswith("sites/example.yaml: 1 problem in the site file")
    assert "check the path or set TERRAVIXENS_SITE" in absent.stderr
    (tmp_path / "sites").mkdir()
    (tmp_path / "sites" / "example.yaml").write_text(EXAMPLE_SITE.read_text())
    present = subprocess.run(
        [str(BIN / "terravixens"), "validate"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert present.returncode == 0 and present.stdout.startswith("site: ok"), present.stderr
