"""OpenTofu (>= 1.11, pinned in providers.json, built by `make setup-test`) runs one operations path end to end:
`terravixens deploy` of the hypervisors layer and of the platform layer's Proxmox side (the projection onto the
providers with a binary here, as tests/integration/test_operations.py does), against the fake Proxmox VE on
loopback, offline (the mirror mode), then a second deploy that plans no change (docs/adr/0042).

The fallback CLI must be >= 1.11: the gitops layer's `kubernetes_secret_v1.data_wo` is a write-only attribute, which
OpenTofu supports from 1.11 on. What a real cluster adds: the platform layer's Talos side (no talos binary here).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from terravixens import provider_install
from terravixens.exitcodes import ExitCode
from terravixens.operations.console import Console
from terravixens.operations.deploy import DeployOptions, deploy
from terravixens.operations.files import private_process
from terravixens.operations.terraform import Terraform
from terravixens.operations.workspace import Workspace
from tests import support
from tests.fakepve_ext import FakePveServer
from tests.loopback import free_port
from tests.terraform import mirrored_providers, offline, projection

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
HOST = "127.0.0.47"
PINNED = json.loads((ROOT / "providers.json").read_text())["opentofu_fallback"]
LAYERS = ["hypervisors", "platform-prod"]


@pytest.fixture(scope="module")
def tofu() -> str:
    """The OpenTofu `make setup-test` built (`make tofu`), else one on PATH: never skipped, a missing one fails."""
    built = provider_install.cache_dir() / "bin" / "tofu"
    found = str(built) if built.exists() else shutil.which("tofu")
    if found is None:
        pytest.fail(f"no OpenTofu in {built.parent} nor on PATH: run `make tofu` (make setup-test builds it)")
    return found


def version_of(binary: str) -> str:
    out = subprocess.run([binary, "version", "-json"], capture_output=True, text=True, timeout=60, check=True).stdout
    return json.loads(out)["terraform_version"]


def test_the_built_opentofu_is_the_pinned_release_and_at_least_1_11(tofu):
    version = version_of(tofu)
    assert version == PINNED["version"].removeprefix("v")  # the release, not a `-dev` build
    major, minor = (int(part) for part in version.split(".")[:2])
    assert (major, minor) >= tuple(int(part) for part in PINNED["minimum"].split("."))


@pytest.fixture()
def fake(tmp_path):
    server = FakePveServer(HOST, free_port(HOST), tmp_path / "pki").start()
    yield server
    server.stop()


def project(layer: str, document: dict) -> dict:
    projected, _ = projection(document, mirrored_providers())
    return projected


def test_deploy_then_replan_with_opentofu_against_the_fake_proxmox(fake, tofu, tmp_path, monkeypatch):
    for name in ("TF_CLI_CONFIG_FILE", "CDKTF_SKIP_PROVIDER_LOCK"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERRAVIXENS_PROVIDERS", "mirror")
    cut = {k: v for k, v in offline({}).items() if "proxy" in k.lower()}
    previous = private_process()
    try:
        ws = Workspace(support.site_from(support.loopback_data(fake.url)), root=tmp_path, transform=project)
        tf = Terraform(binary=tofu, env={**fake.provider_env(), **cut})
        first = Console(out=io.StringIO())
        assert deploy(ws, LAYERS, tf, DeployOptions(yes=True), first) == ExitCode.OK, first.out.getvalue()
        text = first.out.getvalue()
        assert "hypervisors: guard — ok" in text and "platform-prod: summary — 6 to create" in text, text
        assert "deployed: hypervisors, platform-prod" in text
        assert fake.call(lambda: sorted(vm.vmid for vm in fake.pve.vms)) == [1101, 1102, 1103, 1201, 1202]
        state = json.loads((tmp_path / "state" / "hypervisors.tfstate").read_text())
        assert state["terraform_version"] == version_of(tofu)  # OpenTofu wrote it
        lock = (ws.stack_dir("hypervisors") / ".terraform.lock.hcl").read_text()
        assert 'provider "registry.opentofu.org/bpg/proxmox"' in lock  # installed from the mirror, as OpenTofu names it

        again = Console(out=io.StringIO())
        assert deploy(ws, LAYERS, tf, DeployOptions(yes=True, synth=False), again) == ExitCode.OK
        text = again.out.getvalue()
        assert "hypervisors: plan — no changes" in text and "platform-prod: plan — no changes" in text, text
        assert "deployed: nothing (no changes)" in text
    finally:
        os.umask(previous)
