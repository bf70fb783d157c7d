"""Which provider installation each mode uses, proven with the real CLIs and no network (ADR 0013).

"No network" is made certain, not assumed: every HTTP(S) request goes to a proxy on a loopback port where nothing
listens, except the fake Proxmox VE on loopback. So a step that would reach the Terraform Registry fails at once,
here and on a machine that has the registry.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from terravixens import provider_install
from tests import support
from tests.fakepve_ext import FakePveServer
from tests.loopback import free_port
from tests.terraform import mirrored_providers, offline, projection, user_environment

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
HOST = "127.0.0.44"
CDKTF = ROOT / "node_modules" / ".bin" / "cdktf"


def write_hypervisors(workdir: Path) -> None:
    stack = support.synth(support.site_from(support.loopback_data()))["hypervisors"]
    document, _ = projection(stack, mirrored_providers())
    document["terraform"]["backend"] = {"local": {"path": "terraform.tfstate"}}
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "cdk.tf.json").write_text(json.dumps(document))


@pytest.mark.parametrize("selected", provider_install.MODES)
def test_init_installs_from_the_registry_or_from_the_mirror(terraform_binary, tmp_path, selected):
    """registry: Terraform's own installation asks the registry (and offline, fails saying so);
    mirror: the provider comes from the filesystem mirror, offline."""
    write_hypervisors(tmp_path)
    env = offline(provider_install.terraform_env(selected, user_environment()))
    result = subprocess.run(
        [terraform_binary, "init", "-input=false", "-no-color"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = result.stdout + result.stderr
    if selected == "registry":
        assert result.returncode != 0
        assert "registry" in output and "bpg/proxmox" in output, output
        assert "TF_CLI_CONFIG_FILE" not in provider_install.environment_for(selected, user_environment())
    else:
        assert result.returncode == 0, output
        lock = (tmp_path / ".terraform.lock.hcl").read_text()
        assert 'provider "registry.' in lock and "/bpg/proxmox" in lock and "h1:" in lock


@pytest.fixture
def fake(tmp_path):
    server = FakePveServer(HOST, free_port(HOST), tmp_path / "pki").start()
    yield server
    server.stop()


def cdktf_project(root: Path, endpoint: str) -> Path:
    """A cdktf project dir with the loopback site's stacks synthesized into cdktf.out (deployed with --skip-synth)."""
    (root / "cdktf.json").write_text(
        json.dumps(
            {
                "language": "python",
                "app": "false",
                "sendCrashReports": "false",
                "terraformProviders": [],
                "terraformModules": [],
                "context": {},
            }
        )
    )
    support.synth(support.site_from(support.loopback_data(endpoint)), root / "cdktf.out")
    return root


def cdktf_deploy_hypervisors(project: Path, env: dict[str, str], terraform_binary: str):
    env = dict(env, TERRAFORM_BINARY_NAME=terraform_binary, PATH=f"{CDKTF.parent}{os.pathsep}{env['PATH']}")
    return subprocess.run(
        [str(CDKTF), "deploy", "hypervisors", "--auto-approve", "--skip-synth"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_first_offline_cdktf_deploy_of_the_hypervisors_succeeds(fake, terraform_binary, tmp_path):
    """Mirror mode, fresh checkout (no lock file yet), no network: the first `cdktf deploy hypervisors` applies."""
    project = cdktf_project(tmp_path, fake.url)
    stack_dir = project / "cdktf.out" / "stacks" / "hypervisors"
    assert not (stack_dir / ".terraform.lock.hcl").exists()
    env = offline({**provider_install.terraform_env("mirror", user_environment()), **fake.provider_env()})
    result = cdktf_deploy_hypervisors(project, env, terraform_binary)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "/bpg/proxmox" in (stack_dir / ".terraform.lock.hcl").read_text()
    state = json.loads((project / "state" / "hypervisors.tfstate").read_text())
    assert {r["type"] for r in state["resources"]} >= {"proxmox_network_linux_bridge", "proxmox_download_file"}


def test_without_skipping_cdktf_provider_lock_the_first_offline_deploy_fails(fake, terraform_binary, tmp_path):
    """What the mirror mode fixes: cdktf runs `terraform providers lock` when a stack has no lock file, and that
    command ignores the CLI config and asks the registry."""
    project = cdktf_project(tmp_path, fake.url)
    env = offline({**provider_install.terraform_env("mirror", user_environment()), **fake.provider_env()})
    env.pop("CDKTF_SKIP_PROVIDER_LOCK")
    result = cdktf_deploy_hypervisors(project, env, terraform_binary)
    assert result.returncode != 0
    assert "Could not retrieve providers for locking" in result.stdout + result.stderr
    assert not (project / "state" / "hypervisors.tfstate").exists()
