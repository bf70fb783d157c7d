"""How Terraform installs providers: the registry (default) or the offline mirror built from Go (asked for).

Two modes, chosen by `TERRAVIXENS_PROVIDERS` (docs/adr/0013-provider-installation-modes.md):

- `registry` (default): Terraform's own provider installation. Nothing is added to the environment: `cdktf deploy`
  and `terraform init` install from the Terraform Registry (or whatever the user's own CLI config says).
- `mirror`: providers come only from the filesystem mirror that `make mirror` builds from the Go module proxy
  (`$TERRAVIXENS_CACHE/mirror`), through a CLI config that has no other installation method, and cdktf's provider-lock
  step is skipped: `terraform providers lock` ignores the CLI config and always asks the registry, so offline it
  fails the first `cdktf deploy`/`cdktf diff` of a stack (the lock file `terraform init` writes from the mirror is
  what it would have added to anyway: cdktf locks only linux_amd64).

Standard library only: `scripts/providers.py` imports it before any virtualenv exists.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from terravixens import guarded_path

MODE_VARIABLE = "TERRAVIXENS_PROVIDERS"
MODES = ("registry", "mirror")
DEFAULT_MODE = "registry"
MIRROR_CLI_CONFIG_NAME = "mirror.tfrc"
PLATFORM = "linux_amd64"
# What a user runs to install providers offline (README, docs/commands.md): both commands, in one line.
MIRROR_FIX = '`make mirror`, then `eval "$(make -s provider-env TERRAVIXENS_PROVIDERS=mirror)"`'


class ProviderModeError(ValueError):
    """A `TERRAVIXENS_PROVIDERS` value that names no mode."""


def mode(environ: Mapping[str, str] = os.environ) -> str:
    value = environ.get(MODE_VARIABLE, "").strip() or DEFAULT_MODE
    if value not in MODES:
        raise ProviderModeError(
            f"{MODE_VARIABLE}={value[:40]!r} is not a provider installation mode: "
            f"use {' or '.join(MODES)} (unset means {DEFAULT_MODE})"
        )
    return value


def cache_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """Outside the repository; shared by every checkout on the machine. `TERRAVIXENS_CACHE` overrides it."""
    configured = environ.get("TERRAVIXENS_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "terravixens"


def mirror_dir(environ: Mapping[str, str] = os.environ) -> Path:
    return cache_dir(environ) / "mirror"


def mirror_cli_config(environ: Mapping[str, str] = os.environ) -> Path:
    return cache_dir(environ) / MIRROR_CLI_CONFIG_NAME


def mirror_cli_config_text(mirror: Path) -> str:
    """Providers from the mirror only: a provider not in it fails `init` at once and never reaches a network.
    OpenTofu names the same providers after its own registry host: both hosts are served from the mirror."""
    return (
        "# Written by scripts/providers.py (make mirror): install providers from the local filesystem mirror only.\n"
        "# Used only when asked: TERRAVIXENS_PROVIDERS=mirror (see docs/adr/0013-provider-installation-modes.md).\n"
        "provider_installation {\n"
        f'  filesystem_mirror {{\n    path    = "{mirror}"\n'
        '    include = ["registry.terraform.io/*/*", "registry.opentofu.org/*/*"]\n  }\n'
        "}\n"
    )


def environment_for(selected: str, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """What Terraform and cdktf need set for `selected`, beyond `environ`; empty for the registry mode.

    The registry mode adds nothing and removes nothing: a user's own TF_CLI_CONFIG_FILE (a network mirror, a
    plugin cache) keeps working.
    """
    if selected not in MODES:
        raise ProviderModeError(f"unknown provider installation mode {selected[:40]!r}: use {' or '.join(MODES)}")
    if selected == "registry":
        return {}
    return {
        "TF_CLI_CONFIG_FILE": str(mirror_cli_config(environ)),
        # cdktf-cli reads every option from CDKTF_<OPTION>: this is `--skip-provider-lock` for deploy, diff, destroy.
        "CDKTF_SKIP_PROVIDER_LOCK": "true",
    }


def terraform_env(selected: str | None = None, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """A full environment for the terraform/tofu/cdktf that terravixens itself runs, in `selected` mode (default: the
    one the environment asks): HashiCorp's checkpoint calls off, and the stacks' `terravixens_guarded` requirement
    met (terravixens.guarded_path: these callers run the guard themselves, or are the tests' own harness).

    Never exported to a user's shell: `shell_exports` prints the mode's variables only."""
    chosen = mode(environ) if selected is None else selected
    env = dict(environ)
    env.update(environment_for(chosen, environ))
    env.setdefault("CHECKPOINT_DISABLE", "1")
    env.update(guarded_path.environment())
    return env


def shell_exports(selected: str, environ: Mapping[str, str] = os.environ) -> str:
    """Lines for `eval "$(make -s provider-env)"`: the mode's variables, or a comment saying there are none."""
    extra = environment_for(selected, environ)
    if not extra:
        return f"# {MODE_VARIABLE}={selected}: Terraform's own provider installation, nothing to export\n"
    return "".join(f"export {name}={shlex.quote(value)}\n" for name, value in extra.items())


# ------------------------------------------------------------------------------------------- what the mirror holds
def mirrored(environ: Mapping[str, str] = os.environ) -> list[str]:
    """`namespace/type version` of every provider binary in the mirror (its registry.terraform.io side), sorted."""
    root = mirror_dir(environ) / "registry.terraform.io"
    found = {
        f"{binary.parents[3].name}/{binary.parents[2].name} {binary.parents[1].name}"
        for binary in root.glob(f"*/*/*/{PLATFORM}/terraform-provider-*")
    }
    return sorted(found)


def _held(environ: Mapping[str, str]) -> str:
    held = mirrored(environ)
    return f"it holds {', '.join(held)}" if held else "not built yet"


# ------------------------------------------------------------------------------------- init failures that name a fix
ANSI = re.compile(r"\x1b\[[0-9;]*m")
# Terraform 1.11 and OpenTofu 1.11 (both captured offline): a provider the filesystem mirror does not hold, and a
# registry that cannot be reached. Terraform wraps its diagnostics at 78 columns: matched on the text with its
# whitespace folded.
NOT_IN_MIRROR = re.compile(
    r"provider (?:registry\.(?:terraform\.io|opentofu\.org)/)?([\w.-]+/[\w.-]+) was not found in any of the search "
    r"locations"
)
UNREACHABLE = re.compile(
    r"could not connect to (registry\.[\w.-]+|[\w.-]+\.[a-z]{2,})\s*:\s*(?:failed to request discovery document:\s*)?"
    r"(.*?)(?:\s+To see which modules|$)"
)
NETWORK_FAILURES = (
    "no such host",
    "connection refused",
    "i/o timeout",
    "network is unreachable",
    "proxyconnect",
    "TLS handshake timeout",
    "context deadline exceeded",
    "Client.Timeout",
    "dial tcp",
)


def init_failure(output: str, environ: Mapping[str, str] = os.environ) -> str | None:
    """One line naming the fix when `terraform init` (or `tofu init`) failed installing providers; None otherwise.

    - a provider the mirror does not hold (the mirror mode): which one, what the mirror holds, and the way out;
    - the registry unreachable (the registry mode offline): the mirror, and the two commands that select it.
    """
    text = " ".join(ANSI.sub("", output).split())
    missing = sorted(set(NOT_IN_MIRROR.findall(text)))
    if missing:
        return (
            f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not in the offline mirror "
            f"{mirror_dir(environ)} ({_held(environ)}): in the mirror mode only layers whose providers are all there "
            f"can be initialised; use the registry ({MODE_VARIABLE}=registry, with network access) or a mirror of "
            f"your own that holds {'it' if len(missing) == 1 else 'them'}"
        )
    reached = UNREACHABLE.search(text)
    if reached and any(marker in text for marker in NETWORK_FAILURES):
        cause = reached.group(2).strip().rstrip(".")
        return (
            f"the provider registry {reached.group(1)} cannot be reached ({cause[:160]}): offline, install the "
            f"providers from the mirror built from the Go module proxy: {MIRROR_FIX} "
            f"(mirror {mirror_dir(environ)}: {_held(environ)}; the layers whose providers are all there deploy)"
        )
    return None


# ------------------------------------------------------------------------------------------------------ credentials
PROXMOX_SOURCE = "bpg/proxmox"
PROXMOX_CREDENTIALS = (
    ("PROXMOX_VE_API_TOKEN",),
    ("PROXMOX_VE_AUTH_TICKET", "PROXMOX_VE_CSRF_PREVENTION_TOKEN"),
    ("PROXMOX_VE_USERNAME", "PROXMOX_VE_PASSWORD"),
)
# The attributes of a bpg/proxmox provider block that hold the same credentials (one set is enough).
PROXMOX_ATTRIBUTES = (("api_token",), ("auth_ticket", "csrf_prevention_token"), ("username", "password"))
VARIABLE_REFERENCE = re.compile(r"^\$\{var\.([A-Za-z_][\w-]*)\}$")
PROXMOX_FIX = "set PROXMOX_VE_API_TOKEN (USER@REALM!TOKENID=SECRET), or PROXMOX_VE_USERNAME and PROXMOX_VE_PASSWORD"


def _local_names(document: Mapping[str, Any], source: str) -> list[str]:
    required = (document.get("terraform") or {}).get("required_providers") or {}
    return [
        name
        for name, body in required.items()
        if isinstance(body, dict) and str(body.get("source", "")).split("registry.terraform.io/")[-1] == source
    ]


def _attribute_set(value: object, environ: Mapping[str, str]) -> bool:
    """A provider attribute that will hold a value: a `${var.NAME}` with TF_VAR_NAME set, or any other value."""
    if value is None or value == "":
        return False
    reference = VARIABLE_REFERENCE.match(value) if isinstance(value, str) else None
    return reference is None or bool(environ.get(f"TF_VAR_{reference.group(1)}"))


def missing_credentials(document: Mapping[str, Any], environ: Mapping[str, str] = os.environ) -> str | None:
    """What a layer's bpg/proxmox provider would fail on at plan time for want of credentials, said before Terraform
    runs: the variables to set. (Inside a plan, bpg/proxmox 0.111.1 answers "Unable to create Proxmox VE API
    credentials: must provide either username and password, an API token, or a ticket", Terraform 1.11.4 captured.)

    None when every proxmox provider block of the layer has a set of credentials (from its own attributes, their
    TF_VAR_ variables, or the provider's environment variables) or the layer has none."""
    if any(all(environ.get(name) for name in group) for group in PROXMOX_CREDENTIALS):
        return None
    for name in _local_names(document, PROXMOX_SOURCE):
        blocks = (document.get("provider") or {}).get(name) or []
        for block in blocks if isinstance(blocks, list) else [blocks]:
            if not isinstance(block, dict):
                continue
            if any(all(_attribute_set(block.get(a), environ) for a in group) for group in PROXMOX_ATTRIBUTES):
                continue
            alias = f" (alias {block['alias']})" if block.get("alias") else ""
            return f"the {PROXMOX_SOURCE} provider{alias} has no credentials: {PROXMOX_FIX}"
    return None
