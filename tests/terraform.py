"""Running the real Terraform CLI in tests: offline mirror only (the tests opt in to the mirror mode of
terravixens.provider_install), and stacks projected onto the mirrored providers."""

from __future__ import annotations

import copy
import json
import os
import subprocess
from pathlib import Path

from terravixens import provider_install
from tests.loopback import free_port

MIRROR = provider_install.mirror_dir() / "registry.terraform.io"
BUILTIN_TYPES = {"terraform_remote_state", "terraform_data"}


def mirrored_providers() -> set[str]:
    """Local provider names (proxmox, talos, …) with a binary in the filesystem mirror."""
    return {path.name for path in MIRROR.glob("*/*") if any(path.glob("*/*/terraform-provider-*"))}


def provider_of(block_type: str) -> str:
    return block_type.split("_", 1)[0]


def projection(stack: dict, available: set[str]) -> tuple[dict, set[str]]:
    """The stack restricted to `available` providers, and the addresses that were dropped."""
    result = copy.deepcopy(stack)
    dropped: set[str] = set()
    for kind, prefix in (("resource", ""), ("data", "data.")):
        for block_type in list(result.get(kind, {})):
            if block_type in BUILTIN_TYPES or provider_of(block_type) in available:
                continue
            dropped.update(f"{prefix}{block_type}.{name}" for name in result[kind].pop(block_type))
        if kind in result and not result[kind]:
            del result[kind]
    for name in list(result.get("provider", {})):
        if name not in available:
            del result["provider"][name]
    if result.get("provider") == {}:
        del result["provider"]
    required = result.get("terraform", {}).get("required_providers", {})
    for name in list(required):
        if name not in available:
            del required[name]
    for name, output in list(result.get("output", {}).items()):
        if any(address.split(".", 1)[-1] in json.dumps(output) for address in dropped):
            del result["output"][name]
            dropped.add(f"output.{name}")
    for kind in ("resource", "data"):
        for items in result.get(kind, {}).values():
            for body in items.values():
                if "depends_on" in body:
                    body["depends_on"] = [
                        d
                        for d in body["depends_on"]
                        if d.removeprefix("data.") not in {a.removeprefix("data.") for a in dropped}
                    ]
    return result, dropped


def terraform_env(**extra: str) -> dict:
    return dict(provider_install.terraform_env("mirror"), CHECKPOINT_DISABLE="1", TF_IN_AUTOMATION="1", **extra)


def terraform(binary: str, workdir: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [binary, *args], cwd=workdir, env=terraform_env(**env), capture_output=True, text=True, timeout=600
    )


def validate(binary: str, document: dict, workdir: Path) -> dict:
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "cdk.tf.json").write_text(json.dumps(document, indent=1))
    init = terraform(binary, workdir, "init", "-backend=false", "-input=false", "-no-color")
    assert init.returncode == 0, init.stdout + init.stderr
    result = terraform(binary, workdir, "validate", "-json", "-no-color")
    return json.loads(result.stdout)


def problems(report: dict) -> list[str]:
    return [
        f"{d['severity']}: {d['summary']} — {d.get('detail', '')} "
        f"@ {d.get('address', d.get('range', {}).get('filename', ''))}"
        for d in report.get("diagnostics", [])
    ]


def offline(environ: dict[str, str]) -> dict[str, str]:
    """`environ` with the network cut: only loopback hosts are reached directly."""
    dead = f"http://127.0.0.1:{free_port()}"
    cut = {
        "HTTPS_PROXY": dead,
        "HTTP_PROXY": dead,
        "https_proxy": dead,
        "http_proxy": dead,
        "NO_PROXY": "127.0.0.0/8,localhost",
        "no_proxy": "127.0.0.0/8,localhost",
    }
    return {**environ, **cut, "CHECKPOINT_DISABLE": "1", "TF_IN_AUTOMATION": "1"}


def user_environment() -> dict[str, str]:
    """The environment of a user who configured nothing for Terraform."""
    return {
        k: v
        for k, v in os.environ.items()
        if k not in ("TF_CLI_CONFIG_FILE", "TERRAVIXENS_PROVIDERS", "CDKTF_SKIP_PROVIDER_LOCK")
        and not k.startswith("TF_PLUGIN")
    }
