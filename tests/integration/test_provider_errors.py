"""Provider errors that point to the fix, and the mirror mode initialising only the layers asked for, with the real
CLI (issue 18 §2; docs/adr/0042-provider-errors-and-opentofu-1.11.md).

No network, made certain as in test_provider_modes.py: every HTTP(S) request goes to a closed loopback proxy,
except the fake Proxmox VE and moto's S3 server on loopback.

- `terraform init` that cannot reach the registry, or that needs a provider the mirror lacks: one line naming the
  fix, from `terravixens` (operations/terraform.py) and from the cdktf path (scripts/terravixens-terraform);
- `terravixens deploy hypervisors` in the mirror mode, the whole site synthesized (platform-prod needs talos, which
  the mirror does not hold): applies against the fake Proxmox VE and never initialises platform-prod;
- with an S3 state, the hypervisors' guard must initialise platform-prod to pull its state: one line names talos.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from terravixens import provider_install
from terravixens.exitcodes import ExitCode
from terravixens.operations import OperationError
from terravixens.operations.console import Console
from terravixens.operations.deploy import DeployOptions, deploy
from terravixens.operations.files import private_process
from terravixens.operations.terraform import Terraform
from terravixens.operations.workspace import Workspace
from tests import support
from tests.fakepve_ext import FakePveServer
from tests.loopback import free_port
from tests.s3_store import BUCKET, s3_endpoint  # noqa: F401  (module fixture)
from tests.terraform import offline, user_environment

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
HOST = "127.0.0.46"
WRAPPER = ROOT / "scripts" / "terravixens-terraform"
MIRROR_FIX = '`make mirror`, then `eval "$(make -s provider-env TERRAVIXENS_PROVIDERS=mirror)"`'
TALOS_AND_PROXMOX = {
    "terraform": {
        "required_providers": {
            "proxmox": {"source": "bpg/proxmox", "version": "0.111.1"},
            "talos": {"source": "siderolabs/talos", "version": "0.11.0"},
        }
    }
}


@pytest.fixture()
def mode(monkeypatch):
    """Selects a provider installation mode for what the test runs in-process (the user's own settings gone)."""

    def select(selected: str) -> None:
        for name in ("TF_CLI_CONFIG_FILE", "CDKTF_SKIP_PROVIDER_LOCK"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("TERRAVIXENS_PROVIDERS", selected)

    return select


def cut_network() -> dict[str, str]:
    """The variables `offline()` sets: all HTTP(S) through a closed loopback proxy, loopback itself excepted."""
    return {k: v for k, v in offline({}).items() if "proxy" in k.lower()}


def layer_dir(tmp_path: Path, document: dict) -> Path:
    workdir = tmp_path / "cdktf.out" / "stacks" / "platform-prod"
    workdir.mkdir(parents=True)
    (workdir / "cdk.tf.json").write_text(json.dumps(document))
    return workdir


def test_registry_unreachable_is_one_line_naming_the_mirror(terraform_binary, tmp_path, mode):
    mode("registry")
    workdir = layer_dir(tmp_path, TALOS_AND_PROXMOX)
    tf = Terraform(binary=terraform_binary, env=cut_network(), timeout=300)
    with pytest.raises(OperationError) as caught:
        tf.init(workdir, "platform-prod")
    message = str(caught.value)
    assert caught.value.code == ExitCode.FAILED and "\n" not in message
    assert message.startswith("platform-prod: terraform init failed: the provider registry registry.")
    assert "cannot be reached (" in message and "connection refused" in message
    assert f"offline, install the providers from the mirror built from the Go module proxy: {MIRROR_FIX}" in message
    assert f"(mirror {provider_install.mirror_dir()}: it holds bpg/proxmox 0.111.1;" in message


def test_a_provider_the_mirror_lacks_is_one_line_naming_it(terraform_binary, tmp_path, mode):
    mode("mirror")
    workdir = layer_dir(tmp_path, TALOS_AND_PROXMOX)
    tf = Terraform(binary=terraform_binary, env=cut_network(), timeout=300)
    with pytest.raises(OperationError) as caught:
        tf.init(workdir, "platform-prod")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(
        f"platform-prod: terraform init failed: siderolabs/talos is not in the offline mirror "
        f"{provider_install.mirror_dir()} (it holds bpg/proxmox 0.111.1): in the mirror mode only layers whose "
        f"providers are all there can be initialised; use the registry"
    ), message


@pytest.mark.parametrize("selected", provider_install.MODES)
def test_the_cdktf_path_adds_the_same_line_to_terraforms_own_output(terraform_binary, tmp_path, selected):
    """What `npx cdktf deploy` shows: cdktf runs `terraform init` through scripts/terravixens-terraform."""
    workdir = layer_dir(tmp_path, TALOS_AND_PROXMOX)
    env = offline(provider_install.terraform_env(selected, user_environment()))
    env.update(TERRAVIXENS_PROVIDERS=selected, TERRAVIXENS_TERRAFORM=terraform_binary)
    result = subprocess.run(
        [str(WRAPPER), "init", "-input=false", "-no-color"],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 1
    # Terraform's own words, kept ("Failed to query available provider packages"; OpenTofu: "Failed to resolve …")
    assert re.search(r"Error: Failed to (query available|resolve) provider packages", result.stderr), result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("terravixens-terraform: platform-prod: terraform init failed: ")
    if selected == "registry":
        assert MIRROR_FIX in last
    else:
        assert "siderolabs/talos is not in the offline mirror" in last


# ------------------------------------------------------------------------ the mirror mode: only the asked layers
@pytest.fixture()
def fake(tmp_path):
    server = FakePveServer(HOST, free_port(HOST), tmp_path / "pki").start()
    yield server
    server.stop()


@pytest.fixture()
def umask():
    previous = private_process()
    yield
    os.umask(previous)


def test_hypervisors_deploys_offline_without_initialising_platform_prod(fake, terraform_binary, tmp_path, mode, umask):
    """The README's promise: the whole site synthesized (platform-prod needs talos), the mirror mode, no network:
    `terravixens deploy hypervisors` applies, and platform-prod's directory is never initialised. Its state is read
    from the local backend's file for the guard (none yet: nothing uses the hypervisors)."""
    mode("mirror")
    root = tmp_path / "site"
    root.mkdir()
    ws = Workspace(support.site_from(support.loopback_data(fake.url)), root=root)
    tf = Terraform(binary=terraform_binary, env={**fake.provider_env(), **cut_network()})
    console = Console(out=io.StringIO())
    assert deploy(ws, ["hypervisors"], tf, DeployOptions(yes=True), console) == ExitCode.OK
    text = console.out.getvalue()
    assert "hypervisors: guard — ok" in text and "deployed: hypervisors" in text, text
    assert "platform-prod" not in text.replace("site: synth — homelab: hypervisors, platform-prod", "")
    assert "siderolabs/talos" in (ws.stack_dir("platform-prod") / "cdk.tf.json").read_text()
    assert not (ws.stack_dir("platform-prod") / ".terraform").exists()
    state = json.loads((root / "state" / "hypervisors.tfstate").read_text())
    assert {r["type"] for r in state["resources"]} >= {"proxmox_network_linux_bridge", "proxmox_download_file"}
    assert fake.call(lambda: sorted(fake.pve.tv_net["pve1"]))  # the bridges were made on the fake


def test_an_s3_state_the_guard_needs_names_the_missing_provider_in_one_line(
    fake,
    terraform_binary,
    tmp_path,
    mode,
    umask,
    s3_endpoint,  # noqa: F811
    monkeypatch,
):
    """With the S3 backend a state can only be pulled through `terraform init` of its layer, which installs
    talos: in the mirror mode that is a stop naming the provider and why the layer was needed, before any apply."""
    mode("mirror")
    endpoint, _client = s3_endpoint
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    data = support.loopback_data(fake.url)
    data["state"] = {
        "backend": "s3",
        "s3": {"endpoint": endpoint, "bucket": BUCKET, "allow_insecure_http": "moto on loopback, a test emulator"},
    }
    data["state"]["s3"]["key_prefix"] = "provider-errors"
    ws = Workspace(support.site_from(data), root=tmp_path)
    tf = Terraform(binary=terraform_binary, env={**fake.provider_env(), **cut_network()})
    console = Console(out=io.StringIO())
    with pytest.raises(OperationError) as caught:
        deploy(ws, ["hypervisors"], tf, DeployOptions(yes=True), console)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(
        "hypervisors: its guard reads platform-prod's state (what its VMs use), and platform-prod: terraform init "
        "failed: siderolabs/talos is not in the offline mirror"
    ), message
    assert "hypervisors: apply" not in console.out.getvalue()
