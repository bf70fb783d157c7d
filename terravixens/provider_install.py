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
import shlex
from collections.abc import Mapping
from pathlib import Path

from terravixens import guarded_path

MODE_VARIABLE = "TERRAVIXENS_PROVIDERS"
MODES = ("registry", "mirror")
DEFAULT_MODE = "registry"
MIRROR_CLI_CONFIG_NAME = "mirror.tfrc"


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
