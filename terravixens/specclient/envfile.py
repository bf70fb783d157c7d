"""The node's environment file, written by cloud-init at create time (systemd EnvironmentFile syntax):

    # /etc/terravixens/node.env  (mode 0600)
    TERRAVIXENS_SPEC_SERVER=https://specs.lab.internal:8443
    TERRAVIXENS_IDENTITY=dns1
    TERRAVIXENS_TOKEN=…                     # only when the node's posture uses a token
    TERRAVIXENS_CA_DATA=LS0tLS1CRUdJTi…      # optional: base64 of the PEM CAs that signed the server's certificate
    TERRAVIXENS_CA_FILE=/etc/terravixens/ca.pem   # optional, instead: a PEM file placed on the node another way
    TERRAVIXENS_ALLOW_INSECURE_HTTP=yes     # only when the site's spec_server.allow_insecure_http says why
    TERRAVIXENS_AGENT_SHA256=…              # a VM's: the agent bundle its first boot may run (ADR 0059)

Read with the strict bounded reader; unknown or repeated keys are refused (a typo must not silently drop the token),
and a file holding a token must be readable by its owner only.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from terravixens.inputs import InputError, Problem, private_mode_problem, read_text, shown
from terravixens.spec_transport import ALLOW_INSECURE_HTTP_KEY, CA_DATA_KEY, ca_pem, plain_http_refusal
from terravixens.standalone.node_env import AGENT_SHA256_KEY, AGENT_SHA256_PATTERN, TOKEN_PATTERN

DEFAULT_PATH = Path("/etc/terravixens/node.env")
PATH_ENV = "TERRAVIXENS_NODE_ENV"
WHAT = "node environment file"
LIMIT = 16 * 1024
KEYS = {
    "TERRAVIXENS_SPEC_SERVER",
    "TERRAVIXENS_IDENTITY",
    "TERRAVIXENS_TOKEN",
    "TERRAVIXENS_CA_FILE",
    CA_DATA_KEY,
    ALLOW_INSECURE_HTTP_KEY,
    AGENT_SHA256_KEY,
}
LINE = re.compile(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
IDENTITY = re.compile(r"^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$")
TOKEN = re.compile(TOKEN_PATTERN)
AGENT_SHA256 = re.compile(AGENT_SHA256_PATTERN)


@dataclass(frozen=True)
class NodeEnv:
    server: str
    identity: str
    token: str | None
    ca_file: Path | None
    ca_pem: str | None = None


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def parse(text: str, path: Path | str) -> NodeEnv:
    values: dict[str, str] = {}
    lines: dict[str, int] = {}
    problems: list[Problem] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = LINE.match(line.strip())
        if match is None:
            problems.append(Problem("(file)", "is not KEY=VALUE: write one setting per line", number))
            continue
        key, value = match.group(1), _unquote(match.group(2))
        if key not in KEYS:
            problems.append(Problem(shown(key, 40).strip("'"), f"unknown key: use {', '.join(sorted(KEYS))}", number))
        elif key in values:
            problems.append(Problem(key, f"appears twice (lines {lines[key]} and {number}): keep one", number))
        else:
            values[key], lines[key] = value, number
    for key in ("TERRAVIXENS_SPEC_SERVER", "TERRAVIXENS_IDENTITY"):
        if key not in values and not any(p.field == key for p in problems):
            problems.append(Problem(key, "is required: add it (cloud-init writes it at create time)"))
    server, identity = values.get("TERRAVIXENS_SPEC_SERVER"), values.get("TERRAVIXENS_IDENTITY")
    token = values.get("TERRAVIXENS_TOKEN") or None
    if server is not None:
        server_line = lines["TERRAVIXENS_SPEC_SERVER"]
        try:
            parts = urlsplit(server)
            port_ok = parts.port is None or parts.port > 0
        except ValueError:  # a port that is not a number, or beyond 65535
            parts, port_ok = None, False
        if (
            parts is None
            or not port_ok
            or parts.scheme not in ("http", "https")
            or not parts.hostname
            or parts.path not in ("", "/")
            or parts.query
            or parts.username
        ):
            problems.append(
                Problem(
                    "TERRAVIXENS_SPEC_SERVER",
                    f"{shown(server)} is not a server URL: write https://HOST[:PORT] (PORT 1-65535)",
                    server_line,
                )
            )
        elif token:
            refusal = plain_http_refusal(server, allowed=values.get(ALLOW_INSECURE_HTTP_KEY) == "yes")
            if refusal is not None:
                problems.append(Problem("TERRAVIXENS_SPEC_SERVER", f"{refusal} (a token is set)", server_line))
    allowance = values.get(ALLOW_INSECURE_HTTP_KEY)
    if allowance is not None and allowance != "yes":
        problems.append(
            Problem(
                ALLOW_INSECURE_HTTP_KEY,
                f"{shown(allowance)} is not 'yes': write yes, or remove the line",
                lines[ALLOW_INSECURE_HTTP_KEY],
            )
        )
    pem = None
    if CA_DATA_KEY in values:
        try:
            pem = ca_pem(values[CA_DATA_KEY])
        except ValueError as error:
            problems.append(Problem(CA_DATA_KEY, str(error), lines[CA_DATA_KEY]))
        if "TERRAVIXENS_CA_FILE" in values:
            problems.append(
                Problem(
                    "TERRAVIXENS_CA_FILE",
                    f"is given with {CA_DATA_KEY}: keep one (the site writes {CA_DATA_KEY})",
                    lines["TERRAVIXENS_CA_FILE"],
                )
            )
    if identity is not None and not IDENTITY.fullmatch(identity):
        problems.append(
            Problem(
                "TERRAVIXENS_IDENTITY",
                f"{shown(identity)} is not a node name (a DNS label)",
                lines["TERRAVIXENS_IDENTITY"],
            )
        )
    pinned = values.get(AGENT_SHA256_KEY)
    if pinned is not None and not AGENT_SHA256.fullmatch(pinned):
        problems.append(
            Problem(
                AGENT_SHA256_KEY,
                f"{shown(pinned, 16)} is not a SHA-256 (64 lower-case hex digits): redeploy the node's layer",
                lines[AGENT_SHA256_KEY],
            )
        )
    if token is not None and not TOKEN.fullmatch(token):
        problems.append(
            Problem(
                "TERRAVIXENS_TOKEN",
                "is not a usable token (32 to 512 letters, digits and + / = . _ ~ -)",
                lines["TERRAVIXENS_TOKEN"],
            )
        )
    if problems or server is None or identity is None:  # both are required: missing, they are problems
        raise InputError(path, problems, WHAT)
    ca = values.get("TERRAVIXENS_CA_FILE")
    return NodeEnv(server.rstrip("/"), identity, token, Path(ca) if ca else None, pem)


def load(path: Path | str | None = None) -> NodeEnv:
    path = Path(path or os.environ.get(PATH_ENV) or DEFAULT_PATH)
    text = read_text(path, limit=LIMIT, what=WHAT)
    env = parse(text, path)
    if env.token is not None:
        problem = private_mode_problem(path, WHAT)
        if problem is not None:
            raise InputError(path, [problem], WHAT)
    return env
