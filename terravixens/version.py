"""`terravixens --version`: every version a bug report needs, each read where it is decided.

terravixens and the cdktf Python package from their installed metadata; the cdktf CLI from the project's
node_modules (the one make and the docs use, not a global one); Terraform from `terraform version -json` through
the bounded runner (a missing or hanging binary is a line that says so, never a traceback: --version always exits
0); the provider pins from providers.json (the one place they are pinned, ADR 0003), else cdktf.json. The project
files are read from the current directory, where cdktf runs.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from terravixens import runner
from terravixens.operations.terraform import terraform_binary

TERRAFORM_TIMEOUT = 20.0
PIN = re.compile(r"^(?P<source>[^@]+)@=?(?P<version>.+)$")
# Which Terraform (or OpenTofu) does what (README, Quick start): synth runs `terraform version` and needs >= 1.5;
# deploying a gitops layer writes the SOPS key and Flux's credentials through write-only attributes: >= 1.11.
SYNTH_MINIMUM, GITOPS_MINIMUM = (1, 5), (1, 11)
NEEDS = "synth needs >= 1.5, deploying a gitops layer >= 1.11 (its write-only attributes)"


@dataclass(frozen=True)
class Versions:
    """What `--version` prints: each version, or a short reason it is not known (missing, unreadable)."""

    terravixens: str
    cdktf: str
    cdktf_cli: str
    terraform: str
    providers: tuple[tuple[str, str], ...]
    providers_from: str

    def lines(self) -> list[str]:
        width = max(len(source) for source, _ in self.providers) if self.providers else 0
        return [
            f"terravixens {self.terravixens}",
            f"cdktf (python) {self.cdktf}",
            f"cdktf-cli {self.cdktf_cli}",
            f"terraform {self.terraform}",
            f"providers ({self.providers_from}):",
            *[f"  {source:<{width}}  {version}" for source, version in self.providers],
        ]


def _distribution(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def _cdktf_cli(root: Path) -> str:
    package = root / "node_modules" / "cdktf-cli" / "package.json"
    try:
        return str(json.loads(package.read_text())["version"])
    except FileNotFoundError:
        return "not installed here (node_modules/cdktf-cli missing: run make setup)"
    except (OSError, ValueError, KeyError, TypeError) as error:
        return f"unreadable ({package.name}: {error})"


def _terraform(root: Path) -> str:
    binary = terraform_binary()
    ran = runner.run([binary, "version", "-json"], timeout=TERRAFORM_TIMEOUT, cwd=root, label=binary)
    if ran.returncode is None and not ran.timed_out and not ran.interrupted:
        return f"not found ({ran.reason}; install Terraform: {NEEDS}; or set TERRAFORM_BINARY_NAME)"
    if not ran.ok:
        return f"unknown ({ran.reason})"
    try:
        document = json.loads(ran.stdout[ran.stdout.index("{") :])
        version = str(document["terraform_version"])
    except (ValueError, KeyError, TypeError):
        return f"unknown ({binary} version -json printed no terraform_version)"
    platform = document.get("platform")
    return f"{version} ({binary}{f', {platform}' if platform else ''}){_good_for(version)}"


def _good_for(version: str) -> str:
    """What a Terraform older than the gitops layer needs cannot do ("" when it does everything)."""
    found = re.match(r"^v?(\d+)\.(\d+)", version)
    if found is None:
        return f" — its version cannot be read: {NEEDS}"
    minor = (int(found[1]), int(found[2]))
    if minor < SYNTH_MINIMUM:
        return f" — too old: {NEEDS}"
    if minor < GITOPS_MINIMUM:
        return " — synth: ok (>= 1.5); deploying a gitops layer needs >= 1.11 (its write-only attributes)"
    return ""


def _providers(root: Path) -> tuple[tuple[tuple[str, str], ...], str]:
    """The pins: providers.json's `providers` (source, version), else cdktf.json's `terraformProviders`."""
    try:
        pinned: Any = json.loads((root / "providers.json").read_text()).get("providers", {})
        return tuple((str(p["source"]), str(p["version"])) for p in pinned.values()), "providers.json"
    except FileNotFoundError:
        pass
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        return (), f"providers.json unreadable: {error}"
    try:
        listed = json.loads((root / "cdktf.json").read_text()).get("terraformProviders", [])
    except FileNotFoundError:
        return (), "no providers.json or cdktf.json in this folder"
    except (OSError, ValueError, AttributeError) as error:
        return (), f"cdktf.json unreadable: {error}"
    pins = []
    for entry in listed:
        found = PIN.match(str(entry))
        pins.append((found["source"], found["version"]) if found else (str(entry), "not pinned"))
    return tuple(pins), "cdktf.json"


def versions(root: Path | None = None) -> Versions:
    root = root or Path.cwd()
    providers, source = _providers(root)
    return Versions(
        terravixens=_distribution("terravixens"),
        cdktf=_distribution("cdktf"),
        cdktf_cli=_cdktf_cli(root),
        terraform=_terraform(root),
        providers=providers,
        providers_from=source,
    )


__all__ = ["Versions", "versions"]
