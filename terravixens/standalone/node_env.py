"""What a standalone node is given at create time: the environment file `terravixens spec get` reads.

    /etc/terravixens/node.env (0600, root)
    TERRAVIXENS_SPEC_SERVER=https://specs.lab.internal:8443
    TERRAVIXENS_IDENTITY=dns1
    TERRAVIXENS_TOKEN='…'          # '' for a `network` posture: the client then sends no token
    TERRAVIXENS_CA_DATA=…          # when the site's spec_server has ca_data: the CAs the node trusts for its spec
    TERRAVIXENS_ALLOW_INSECURE_HTTP=yes   # when the site's spec_server says why plain http is acceptable

The token is known at apply time only, so the L2 stacks render these texts with Terraform's `format()`: the
templates here are format strings whose `%s` are the server URL, the identity and the token, in that order. The
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

import json
from dataclasses import dataclass

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

# First boot (ADR 0045): fetch the spec, then converge — once: the agent records a successful first run in
# /var/lib/terravixens/first-boot.json and a second `run --first-boot` (cloud-init re-run after `cloud-init clean`)
# does nothing. The agent comes with the image (terravixens installed) or as the bundle `spec push` leaves at
# AGENT_BUNDLE; on an image with neither, first boot says so and leaves config to `spec push`. No `%` (format()) and
# no `${` (a Terraform template) in it.
AGENT_BUNDLE = "/usr/local/lib/terravixens/agent.pyz"
FIRST_BOOT = (
    f"if PYTHONPATH={AGENT_BUNDLE} python3 -c 'import terravixens.agent' 2>/dev/null; "
    f"then PYTHONPATH={AGENT_BUNDLE} python3 -m terravixens.agent run --first-boot; "
    "else echo 'terravixens: no agent on this image: config waits for terravixens spec push' >&2; fi"
)

# format(CLOUD_CONFIG_FORMAT, jsonencode(env)): a JSON string is a YAML double-quoted scalar.
CLOUD_CONFIG_FORMAT = (
    "#cloud-config\n"
    "# terravixens vendor data: the spec server, this node's identity and its token (ADR 0026); first boot fetches\n"
    "# the spec and converges (ADR 0045)\n"
    "write_files:\n"
    f"  - path: {ENV_PATH}\n"
    "    owner: root:root\n"
    "    permissions: '0600'\n"
    "    content: %s\n"
    "runcmd:\n"
    f"  - [sh, -c, {json.dumps(FIRST_BOOT)}]\n"
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


def env_format(extra_lines: str = "") -> str:
    """ENV_FORMAT with the site's literal lines appended (a `%` in them escaped for format())."""
    return ENV_FORMAT + extra_lines.replace("%", "%%")


def render_env(server: str, identity: str, token: str | None, extra_lines: str = "") -> str:
    """The file as Terraform's format() renders it (for tests and docs; the stacks render it at apply time)."""
    return ENV_FORMAT.replace("%s", "{}").format(server, identity, token or "") + extra_lines


def render_cloud_config(server: str, identity: str, token: str | None) -> str:
    """The vendor data as Terraform's format(CLOUD_CONFIG_FORMAT, jsonencode(env)) renders it (tests, docs)."""
    return CLOUD_CONFIG_FORMAT.replace("%s", "{}").format(json.dumps(render_env(server, identity, token)))


def snippet_name(node: str, kind: str) -> str:
    """The snippet's file name on the parent: stable per node, so its volume id never changes (ADR 0026)."""
    return f"terravixens-{node}.{'yaml' if kind == 'cloud-init' else 'sh'}"
