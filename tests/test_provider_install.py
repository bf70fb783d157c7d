"""Provider installation modes (terravixens.provider_install, ADR 0013): which CLI config each mode gives Terraform,
and that nothing we run leaves the mirror-only config in a user's environment unless asked."""

import json
import os
import subprocess
from pathlib import Path

import pytest

from terravixens import provider_install

ROOT = Path(__file__).resolve().parent.parent
CACHE = {"TERRAVIXENS_CACHE": "/srv/tv-cache", "HOME": "/home/someone", "PATH": "/usr/bin"}


def test_registry_is_the_default_mode():
    assert provider_install.mode({}) == "registry"
    assert provider_install.mode({"TERRAVIXENS_PROVIDERS": ""}) == "registry"
    assert provider_install.mode({"TERRAVIXENS_PROVIDERS": "mirror"}) == "mirror"


def test_an_unknown_mode_is_refused_with_the_fix():
    with pytest.raises(provider_install.ProviderModeError) as raised:
        provider_install.mode({"TERRAVIXENS_PROVIDERS": "offline"})
    assert str(raised.value) == (
        "TERRAVIXENS_PROVIDERS='offline' is not a provider installation mode: "
        "use registry or mirror (unset means registry)"
    )


def test_registry_mode_adds_no_cli_config_and_keeps_the_users_own():
    assert provider_install.environment_for("registry", CACHE) == {}
    assert "TF_CLI_CONFIG_FILE" not in provider_install.terraform_env("registry", CACHE)
    own = dict(CACHE, TF_CLI_CONFIG_FILE="/home/someone/.terraformrc")
    assert provider_install.terraform_env("registry", own)["TF_CLI_CONFIG_FILE"] == "/home/someone/.terraformrc"


def test_mirror_mode_uses_the_mirror_only_config_and_skips_cdktf_provider_lock():
    env = provider_install.terraform_env("mirror", CACHE)
    assert env["TF_CLI_CONFIG_FILE"] == "/srv/tv-cache/mirror.tfrc"
    assert env["CDKTF_SKIP_PROVIDER_LOCK"] == "true"
    asked = provider_install.terraform_env(None, dict(CACHE, TERRAVIXENS_PROVIDERS="mirror"))
    assert asked == dict(env, TERRAVIXENS_PROVIDERS="mirror")


def test_mirror_config_installs_from_the_mirror_only():
    text = provider_install.mirror_cli_config_text(Path("/srv/tv-cache/mirror"))
    assert "filesystem_mirror" in text and 'path    = "/srv/tv-cache/mirror"' in text
    assert "direct" not in text and "network_mirror" not in text


def make(*args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in ("TF_CLI_CONFIG_FILE", "TERRAVIXENS_PROVIDERS", "CDKTF_SKIP_PROVIDER_LOCK", "MAKEFLAGS")
    }
    return subprocess.run(
        ["make", "--no-print-directory", "-s", *args],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_make_exports_no_cli_config_to_what_it_runs():
    """What every make recipe (synth, test, cdktf) sees: no TF_CLI_CONFIG_FILE unless the user set one."""
    shown = make("--eval", "show-env:\n\t@env", "show-env")
    assert shown.returncode == 0, shown.stderr
    names = {line.split("=", 1)[0] for line in shown.stdout.splitlines()}
    assert "TERRAVIXENS_PROVIDERS" in names  # the check sees make's exports
    assert "TF_CLI_CONFIG_FILE" not in names and "CDKTF_SKIP_PROVIDER_LOCK" not in names


@pytest.mark.parametrize("selected", ["", "registry", "mirror"])
def test_make_provider_env_prints_the_exports_of_the_mode(selected, tmp_path):
    env = {"TERRAVIXENS_CACHE": str(tmp_path)} | ({"TERRAVIXENS_PROVIDERS": selected} if selected else {})
    shown = make("provider-env", **env)
    assert shown.returncode == 0, shown.stderr
    if selected == "mirror":
        assert shown.stdout == (
            f"export TF_CLI_CONFIG_FILE={tmp_path}/mirror.tfrc\nexport CDKTF_SKIP_PROVIDER_LOCK=true\n"
        )
    else:
        assert shown.stdout == (
            "# TERRAVIXENS_PROVIDERS=registry: Terraform's own provider installation, nothing to export\n"
        )


def test_make_provider_env_refuses_an_unknown_mode():
    shown = make("provider-env", TERRAVIXENS_PROVIDERS="offline")
    assert shown.returncode != 0
    assert "TERRAVIXENS_PROVIDERS='offline' is not a provider installation mode" in shown.stderr


def stub_tofu(cache: Path, version: str) -> Path:
    binary = cache / "bin" / "tofu"
    binary.parent.mkdir(parents=True)
    binary.write_text(f'#!/bin/sh\necho \'{{"terraform_version": "{version}", "platform": "linux_amd64"}}\'\n')
    binary.chmod(0o755)
    return binary


def test_make_tofu_keeps_a_binary_that_reports_the_pinned_version(tmp_path):
    """`make tofu` (make setup-test) asks the cached binary its version and builds nothing when it is the pin's."""
    pinned = json.loads((ROOT / "providers.json").read_text())["opentofu_fallback"]["version"].removeprefix("v")
    binary = stub_tofu(tmp_path, pinned)
    shown = make("tofu", TERRAVIXENS_CACHE=str(tmp_path))
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert shown.stdout.startswith(f"[providers] OpenTofu {pinned} in {binary} (")
    assert sorted(p.name for p in tmp_path.rglob("*")) == [".tofu.lock", "bin", "tofu"]  # no download, no build


def test_the_opentofu_pin_is_at_least_1_11():
    """The gitops layer's write-only attributes (data_wo) need OpenTofu >= 1.11."""
    pin = json.loads((ROOT / "providers.json").read_text())["opentofu_fallback"]
    major, minor = (int(part) for part in pin["version"].removeprefix("v").split(".")[:2])
    assert (major, minor) >= (1, 11) and pin["minimum"] == "1.11"
