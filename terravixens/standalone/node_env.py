"""What a standalone node is given at create time: the environment file `terravixens spec get` reads.

    /etc/terravixens/node.env (0600, root)
    TERRAVIXENS_SPEC_SERVER=https://specs.lab.internal:8443
    TERRAVIXENS_IDENTITY=dns1
    TERRAVIXENS_TOKEN='…'          # '' for a `network` posture: the client then sends no token
    TERRAVIXENS_CA_DATA=…          # when the site's spec_server has ca_data: the CAs the node trusts for its spec
    TERRAVIXENS_ALLOW_INSECURE_HTTP=yes   # when the site's spec_server says why plain http is acceptable
    TERRAVIXENS_AGENT_SHA256=…     # a VM's only: the agent bundle its first boot may run (ADR 0059)

The token is known at apply time only, so the L2 stacks render these texts with Terraform's `format()`: the
templates here are format strings whose `%s` are the server URL, the identity and the token, in that order (and,
for a VM, the SHA-256 of the agent bundle, an apply-time input too: ADR 0059). The
token is always written single-quoted (the client strips one pair of outer quotes and nothing else); a token holds
only letters, digits and + / = . _ ~ - (NODE_TOKEN_PATTERN, checked by the stacks' variable validation before
anything is written), so no quote, newline or `$` can break the file, the heredoc or a shell that sources it.

Two carriers, one content (ADR 0026):
- a VM (or nested pve) gets it from cloud-init **vendor data** (`write_files`), so Proxmox still generates the
  user data and network configuration from the VM's `initialization` block;
- a container (no cloud-init) gets it from a Proxmox **hookscript** that writes it into the container after each
  start (`pct exec`), so a new token reaches a container at its next start.
Pure and standard library only: the stacks, the secrets file and the node client (terravixens.specclient) read it.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

ENV_PATH = "/etc/terravixens/node.env"
# Tokens are what `openssl rand -base64 32` or `-hex 32` print (base64url too): no quote, `$`, backslash or space, so
# node.env stays safe to read by any shell or systemd EnvironmentFile, not only by `terravixens spec get`. What the
# secrets file, the spec server and the client accept as a token, checked again by Terraform's variable validation.
TOKEN_PATTERN = "^[A-Za-z0-9+/=._~-]{32,512}$"
NODE_TOKEN_PATTERN = TOKEN_PATTERN

# format(ENV_FORMAT, server, identity, token)
ENV_FORMAT = (
    "# terravixens: written at create time; `terravixens spec get` reads it (docs/standalone.md)\n"
    "TERRAVIXENS_SPEC_SERVER=%s\n"
    "TERRAVIXENS_IDENTITY=%s\n"
    "TERRAVIXENS_TOKEN='%s'\n"
)

# First boot (ADR 0045, 0059): the vendor data writes the bootstrap (terravixens/standalone/first_boot.py, standard
# library only) beside node.env and runs it once per instance: it fetches the agent bundle from the spec server with
# the node's credentials, refuses one whose SHA-256 is not AGENT_SHA256_KEY's, installs it at AGENT_BUNDLE and runs
# `agent run --first-boot` (fetch the spec, converge; a second first boot finds first-boot.json and does nothing).
# A stock Debian or Ubuntu cloud image needs nothing else: python3 is there for cloud-init.
AGENT_BUNDLE = "/usr/local/lib/terravixens/agent.pyz"
FIRST_BOOT_SCRIPT = "/usr/local/lib/terravixens/first-boot.py"
FIRST_BOOT = ["python3", FIRST_BOOT_SCRIPT]
AGENT_SHA256_KEY = "TERRAVIXENS_AGENT_SHA256"
AGENT_SHA256_PATTERN = "^[0-9a-f]{64}$"
# format(…, server, identity, token, sha256): a VM's node.env also pins the agent bundle its first boot may run.
PINNED_FORMAT = ENV_FORMAT + f"{AGENT_SHA256_KEY}=%s\n"


@functools.cache
def first_boot_source() -> str:
    """The bootstrap's text, checked for what would not reach the node as it is: `%` (format()), `$` (a Terraform
    template sequence), a backslash (cdktf's raw strings mangle a backslash before a quote) or a tab (it goes into a
    YAML block, indented with spaces)."""
    text = Path(__file__).with_name("first_boot.py").read_text(encoding="utf-8")
    if any(character in text for character in "%$\\\t"):
        raise ValueError("first_boot.py holds a % $ backslash or tab: the vendor data would not carry it as it is")
    return text


@functools.cache
def cloud_config_format() -> str:
    """format(cloud_config_format(), jsonencode(env)): a JSON string is a YAML double-quoted scalar. Built on first
    use (the agent, which imports this module inside its bundle, never needs it)."""
    return (
        "#cloud-config\n"
        "# terravixens vendor data: the spec server, this node's identity, its token and the agent bundle it may run\n"
        "# (ADR 0026, 0059); first boot fetches that bundle, then the spec, and converges (ADR 0045)\n"
        "write_files:\n"
        f"  - path: {ENV_PATH}\n"
        "    owner: root:root\n"
        "    permissions: '0600'\n"
        "    content: %s\n"
        f"  - path: {FIRST_BOOT_SCRIPT}\n"
        "    owner: root:root\n"
        "    permissions: '0700'\n"
        "    content: |\n"
        + "".join(f"      {line}".rstrip() + "\n" for line in first_boot_source().splitlines())
        + "runcmd:\n"
        + f"  - {json.dumps(FIRST_BOOT)}\n"
    )


HEREDOC_END = "TERRAVIXENS_NODE_ENV"
# format(HOOKSCRIPT_FORMAT, env): PVE runs `<script> <vmid> <phase>` on the host at each phase of the container.
HOOKSCRIPT_FORMAT = (
    "#!/bin/sh\n"
    "# terravixens hookscript: writes the container's node.env after each start (ADR 0026)\n"
    '[ "$2" = post-start ] || exit 0\n'
    'pct exec "$1" -- /bin/sh -c \'umask 077 && mkdir -p /etc/terravixens && '
    f"cat > {ENV_PATH}.new && mv {ENV_PATH}.new {ENV_PATH}' <<'{HEREDOC_END}'\n"
    "%s"
    f"{HEREDOC_END}\n"
)


@dataclass(frozen=True)
class Trust:
    """What the site says about reaching its spec server, the same for every node: a private CA (`ca_data`, base64
    of PEM certificates, checked by the site model) and whether plain http was allowed (spec_transport)."""

    ca_data: str | None = None
    allow_insecure_http: bool = False

    def lines(self) -> str:
        """The node.env lines after the token: base64 and a constant, so no quote, `$`, `%` or newline."""
        lines = f"TERRAVIXENS_CA_DATA={self.ca_data}\n" if self.ca_data else ""
        return lines + ("TERRAVIXENS_ALLOW_INSECURE_HTTP=yes\n" if self.allow_insecure_http else "")


NO_TRUST = Trust()


def site_lines(allow_insecure_http: bool, ca_data: str | None) -> str:
    return Trust(ca_data, allow_insecure_http).lines()


def env_format(extra_lines: str = "", pinned: bool = False) -> str:
    """ENV_FORMAT (PINNED_FORMAT: a fourth argument, the agent bundle's SHA-256) with the site's literal lines
    appended (a `%` in them escaped for format())."""
    return (PINNED_FORMAT if pinned else ENV_FORMAT) + extra_lines.replace("%", "%%")


def render_env(
    server: str, identity: str, token: str | None, extra_lines: str = "", agent_sha256: str | None = None
) -> str:
    """The file as Terraform's format() renders it (for tests and docs; the stacks render it at apply time): a VM's
    pins its agent bundle (`agent_sha256`), a container's does not."""
    pinned = agent_sha256 is not None
    arguments = (server, identity, token or "", *([agent_sha256] if pinned else []))
    return env_format(pinned=pinned).replace("%s", "{}").format(*arguments) + extra_lines


def render_cloud_config(server: str, identity: str, token: str | None, agent_sha256: str, extra_lines: str = "") -> str:
    """The vendor data as Terraform's format(cloud_config_format(), jsonencode(env)) renders it (tests, docs)."""
    env = render_env(server, identity, token, extra_lines, agent_sha256)
    return cloud_config_format().replace("%s", json.dumps(env), 1)


def snippet_name(node: str, kind: str) -> str:
    """The snippet's file name on the parent: stable per node, so its volume id never changes (ADR 0026)."""
    return f"terravixens-{node}.{'yaml' if kind == 'cloud-init' else 'sh'}"
