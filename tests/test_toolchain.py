"""The offline provider toolchain's own rules (scripts/providers.py), without building anything."""

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def providers():
    spec = importlib.util.spec_from_file_location("providers_script", ROOT / "scripts" / "providers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cdktf_json_agrees_with_the_pins(providers):
    providers.check_pins()
    assert json.loads((ROOT / "cdktf.json").read_text())["terraformProviders"] == [
        "bpg/proxmox@=0.111.1",
        "siderolabs/talos@=0.11.0",
        "hashicorp/helm@=3.1.1",
        "hashicorp/kubernetes@=2.38.0",
    ]


def test_disagreeing_pins_stop_the_toolchain(providers, monkeypatch):
    monkeypatch.setitem(providers.PINS["providers"]["proxmox"], "version", "0.99.0")
    with pytest.raises(SystemExit) as raised:
        providers.check_pins()
    assert str(raised.value) == (
        "[providers] cdktf.json pins bpg/proxmox@=0.111.1, providers.json says bpg/proxmox@=0.99.0: make them agree"
    )


def test_schema_cache_file_names(providers):
    assert providers.cache_file_name("proxmox", "=0.111.1") == "proxmox@%3D0.111.1.json"
    assert providers.cache_file_name("talos", "~> 0.11") == "talos@~%3E%200.11.json"


def test_mirror_layout(providers):
    path = providers.mirror_path("bpg/proxmox", "0.111.1")
    assert (
        path.relative_to(providers.MIRROR).as_posix()
        == "registry.terraform.io/bpg/proxmox/0.111.1/linux_amd64/terraform-provider-proxmox_v0.111.1"
    )


def test_schema_comparison_ignores_write_only(providers):
    with_flag = {"block": {"attributes": {"token": {"type": "string", "write_only": True}}}}
    without = {"block": {"attributes": {"token": {"type": "string"}}}}
    assert providers.comparable(with_flag) == providers.comparable(without)
    assert providers.comparable(with_flag) != providers.comparable({"block": {"attributes": {}}})


def test_an_unknown_command_is_refused(providers):
    with pytest.raises(SystemExit) as raised:
        providers.main(["build"])
    assert str(raised.value) == "[providers] unknown command 'build': use bindings, mirror, tofu, env or nothing (both)"


def test_the_mirror_cli_config_lives_in_the_cache(providers):
    assert providers.CLI_CONFIG == providers.CACHE / "mirror.tfrc"
    assert providers.tf_env()["TF_CLI_CONFIG_FILE"] == str(providers.CLI_CONFIG)
