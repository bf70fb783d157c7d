"""Provider errors that point to the fix (issue 18 §2): what `terraform init` says when it cannot install a
provider, and a missing Proxmox VE credential, each become one line naming what to do.

Terraform's own words are the captured bytes in tests/fixtures/terraform-init/ (Terraform 1.11.4 and OpenTofu 1.11.6
without network; the mirror's path replaced by /srv/tv-cache/mirror and the machine's resolver by 127.0.0.53);
tests/integration/test_provider_errors.py holds the same lines to the real CLI."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from terravixens import provider_install
from terravixens.exitcodes import ExitCode
from terravixens.operations import OperationError
from terravixens.operations.console import Console
from terravixens.operations.deploy import DeployOptions, deploy
from terravixens.operations.terraform import Terraform
from terravixens.operations.workspace import Workspace
from tests import support
from tests.fake_terraform import FakeTerraform

CAPTURED = Path(__file__).resolve().parent / "fixtures" / "terraform-init"
MIRROR_FIX = '`make mirror`, then `eval "$(make -s provider-env TERRAVIXENS_PROVIDERS=mirror)"`'
CREDENTIALS = ("PROXMOX_VE_API_TOKEN", "PROXMOX_VE_USERNAME", "PROXMOX_VE_PASSWORD", "PROXMOX_VE_AUTH_TICKET")


def captured(name: str) -> str:
    return (CAPTURED / name).read_text()


@pytest.fixture()
def cache(tmp_path) -> dict[str, str]:
    """A cache whose mirror holds bpg/proxmox 0.111.1, as `make mirror` leaves it."""
    binary = (
        tmp_path / "mirror/registry.terraform.io/bpg/proxmox/0.111.1/linux_amd64/terraform-provider-proxmox_v0.111.1"
    )
    binary.parent.mkdir(parents=True)
    binary.write_text("")
    return {"TERRAVIXENS_CACHE": str(tmp_path)}


def test_the_mirror_lists_what_it_holds(cache, tmp_path):
    assert provider_install.mirrored(cache) == ["bpg/proxmox 0.111.1"]
    assert provider_install.mirrored({"TERRAVIXENS_CACHE": str(tmp_path / "none")}) == []


@pytest.mark.parametrize(
    ("fixture", "registry", "cause"),
    [
        (
            "terraform-1.11.4-registry-no-such-host.stderr",
            "registry.terraform.io",
            (
                'Get "https://registry.terraform.io/.well-known/terraform.json": dial tcp: lookup '
                "registry.terraform.io on 127.0.0.53:53: no such host"
            ),
        ),
        (
            "terraform-1.11.4-registry-proxy-refused.stderr",
            "registry.terraform.io",
            (
                'Get "https://registry.terraform.io/.well-known/terraform.json": proxyconnect tcp: dial tcp '
                "127.0.0.1:9: connect: connection refused"
            ),
        ),
        (
            "opentofu-1.11.6-registry-proxy-refused.stderr",  # "Failed to resolve provider packages", its own words
            "registry.opentofu.org",
            (
                'Get "https://registry.opentofu.org/.well-known/terraform.json": proxyconnect tcp: dial tcp '
                "127.0.0.1:9: connect: connection refused"
            ),
        ),
    ],
)
def test_an_unreachable_registry_names_the_mirror_and_its_two_commands(cache, fixture, registry, cause):
    line = provider_install.init_failure(captured(fixture), cache)
    assert line == (
        f"the provider registry {registry} cannot be reached ({cause}): offline, install the providers "
        f"from the mirror built from the Go module proxy: {MIRROR_FIX} (mirror {cache['TERRAVIXENS_CACHE']}/mirror: "
        f"it holds bpg/proxmox 0.111.1; the layers whose providers are all there deploy)"
    )
    assert "\n" not in line


@pytest.mark.parametrize(
    "fixture", ["terraform-1.11.4-talos-not-in-mirror.stderr", "opentofu-1.11.6-talos-not-in-mirror.stderr"]
)
def test_a_provider_the_mirror_lacks_is_named_with_what_the_mirror_holds(cache, fixture):
    line = provider_install.init_failure(captured(fixture), cache)
    assert line == (
        f"siderolabs/talos is not in the offline mirror {cache['TERRAVIXENS_CACHE']}/mirror (it holds bpg/proxmox "
        f"0.111.1): in the mirror mode only layers whose providers are all there can be initialised; use the registry "
        f"(TERRAVIXENS_PROVIDERS=registry, with network access) or a mirror of your own that holds it"
    )


def test_other_init_failures_are_left_to_terraforms_own_words(cache):
    backend = '\nError: Failed to get existing workspaces: S3 bucket "tv" does not exist.\n'
    assert provider_install.init_failure(backend, cache) is None
    # A registry that answered and refused (a version that does not exist) is no network problem.
    refused = (
        "Error: Failed to query available provider packages\n\nCould not retrieve the list of available versions "
        "for provider bpg/proxmox: no available releases match the given constraints 9.9.9\n"
    )
    assert provider_install.init_failure(refused, cache) is None


def stand_in(tmp_path: Path, fixture: str) -> Path:
    """A terraform that answers `init` with the captured bytes and exit 1, as Terraform 1.11.4 did."""
    script = tmp_path / "terraform"
    script.write_text(f"#!/bin/sh\ncat '{CAPTURED / fixture}' >&2\nexit 1\n")
    script.chmod(0o755)
    return script


def test_terraform_init_stops_with_one_line_naming_the_fix(tmp_path, cache, monkeypatch):
    monkeypatch.setenv("TERRAVIXENS_CACHE", cache["TERRAVIXENS_CACHE"])
    tf = Terraform(binary=str(stand_in(tmp_path, "terraform-1.11.4-registry-no-such-host.stderr")), timeout=60)
    with pytest.raises(OperationError) as caught:
        tf.init(tmp_path, "hypervisors")
    assert caught.value.code == ExitCode.FAILED
    message = str(caught.value)
    assert message.startswith("hypervisors: terraform init failed: the provider registry registry.terraform.io cannot")
    assert MIRROR_FIX in message and "\n" not in message


def test_any_other_init_failure_keeps_terraforms_tail(tmp_path):
    script = tmp_path / "terraform"
    script.write_text("#!/bin/sh\necho 'Error: Backend configuration changed' >&2\nexit 1\n")
    script.chmod(0o755)
    with pytest.raises(OperationError) as caught:
        Terraform(binary=str(script), timeout=60).init(tmp_path, "hypervisors")
    assert str(caught.value) == "hypervisors: terraform init failed (exit 1):\nError: Backend configuration changed"


# ------------------------------------------------------------------------------------------------------ credentials
def layer(*blocks: dict) -> dict:
    return {
        "terraform": {"required_providers": {"proxmox": {"source": "bpg/proxmox", "version": "0.111.1"}}},
        "provider": {"proxmox": list(blocks)},
    }


NO_CREDENTIALS = (
    "the bpg/proxmox provider has no credentials: set PROXMOX_VE_API_TOKEN (USER@REALM!TOKENID=SECRET), or "
    "PROXMOX_VE_USERNAME and PROXMOX_VE_PASSWORD"
)


def test_a_proxmox_layer_without_credentials_names_the_variables():
    assert provider_install.missing_credentials(layer({"endpoint": "https://pve:8006/"}), {}) == NO_CREDENTIALS


@pytest.mark.parametrize(
    "environ",
    [
        {"PROXMOX_VE_API_TOKEN": "terravixens@pve!tv=x"},
        {"PROXMOX_VE_USERNAME": "root@pam", "PROXMOX_VE_PASSWORD": "x"},
        {"PROXMOX_VE_AUTH_TICKET": "t", "PROXMOX_VE_CSRF_PREVENTION_TOKEN": "c"},
    ],
)
def test_any_set_of_credentials_the_provider_accepts_is_enough(environ):
    assert provider_install.missing_credentials(layer({"endpoint": "https://pve:8006/"}), environ) is None


def test_half_a_set_is_no_credentials():
    """bpg/proxmox needs both the username and the password (proxmox/api/credentials.go)."""
    document = layer({"endpoint": "https://pve:8006/"})
    assert provider_install.missing_credentials(document, {"PROXMOX_VE_USERNAME": "root@pam"}) == NO_CREDENTIALS
    assert provider_install.missing_credentials(document, {"PROXMOX_VE_API_TOKEN": ""}) == NO_CREDENTIALS


def test_a_nested_hosts_token_variable_counts_when_its_tf_var_is_set():
    """The standalone layer's nested Proxmox VE hosts: `api_token = var.…`, null unless TF_VAR_… is set (then the
    provider's environment)."""
    nested = {"alias": "pve-nested", "endpoint": "https://h:8006/", "api_token": "${var.proxmox_api_token_h}"}
    document = layer(nested)
    assert provider_install.missing_credentials(document, {"TF_VAR_proxmox_api_token_h": "u@pve!t=x"}) is None
    assert provider_install.missing_credentials(document, {}) == NO_CREDENTIALS.replace(
        "provider has", "provider (alias pve-nested) has"
    )


def test_layers_without_proxmox_need_no_proxmox_credentials():
    gitops = {"terraform": {"required_providers": {"helm": {"source": "hashicorp/helm", "version": "3.1.1"}}}}
    assert provider_install.missing_credentials(gitops, {}) is None


def test_deploy_without_credentials_stops_with_one_line_before_terraform_runs(tmp_path, monkeypatch):
    for name in CREDENTIALS:
        monkeypatch.delenv(name, raising=False)
    tf = FakeTerraform({})
    tf.env = {}  # the operator exported nothing
    out = Console(out=io.StringIO())
    ws = Workspace(support.site_from(support.example_data()), root=tmp_path)
    with pytest.raises(OperationError) as caught:
        deploy(ws, ["hypervisors", "platform-prod"], tf, DeployOptions(yes=True), out)
    assert caught.value.code == ExitCode.BAD_INPUT
    assert str(caught.value) == f"hypervisors: {NO_CREDENTIALS}; nothing was run"
    assert tf.calls == []  # no init, no plan: Terraform never ran
    assert json.loads((tmp_path / "cdktf.out/stacks/hypervisors/cdk.tf.json").read_text())["provider"]["proxmox"]


def test_credentials_from_the_environment_let_the_deploy_go_on(tmp_path, monkeypatch):
    for name in CREDENTIALS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PROXMOX_VE_USERNAME", "root@pam")
    monkeypatch.setenv("PROXMOX_VE_PASSWORD", "not-a-secret")
    tf = FakeTerraform({})
    tf.env = {}
    ws = Workspace(support.site_from(support.example_data()), root=tmp_path)
    deploy(ws, ["hypervisors"], tf, DeployOptions(yes=True), Console(out=io.StringIO()))
    assert [call[:2] for call in tf.calls][:2] == [("hypervisors", "init"), ("hypervisors", "plan")]
    assert os.environ["PROXMOX_VE_USERNAME"] == "root@pam"
