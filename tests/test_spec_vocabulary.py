"""One spec vocabulary (issue 29 item 4, issue 26; ADR 0052): the server's model and the node agent read the same
words from terravixens/standalone/vocabulary.py, so what one refuses the other refuses.

- every spec the server resolves from the example site is read by the agent without error;
- a table of bad values is refused by both (the server's Spec and Secrets models, the agent's desired.read), and a
  table of good ones accepted by both — a refusal on one side only fails here;
- the agent's patterns are named, and pinned: a change to a pattern is a change to this file.
On b4ffe4b the domain `a..b`, trailing newlines (`"ops\\n"`, `"30m\\n"`) and system accounts such as `sshd` passed
one side or both.
"""

from __future__ import annotations

import copy
import re
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from terravixens.agent import desired
from terravixens.standalone import spec as server
from terravixens.standalone import vocabulary as words
from terravixens.standalone.resolve import load_standalone
from terravixens.standalone.secrets import Secrets
from tests import spec_support
from tests.agent_support import KEY, spec_document

ROOT = Path(__file__).resolve().parent.parent


def test_every_spec_the_server_resolves_from_the_examples_is_read_by_the_agent(tmp_path):
    site, secrets = spec_support.standalone_copy(tmp_path)
    standalone = load_standalone(site, secrets)
    assert sorted(standalone.documents) == ["dns1", "jump1", "nest1", "tools"]
    assert {node.placed.spec for node in standalone.nodes.values()} == {
        path.stem for path in (ROOT / "sites/specs").glob("*.yaml")
    }  # every example spec is used by a node, so every one is resolved here
    for identity, document in standalone.documents.items():
        want = desired.read(document)
        assert want.identity == identity and want.node_type == document["node"]["type"]
        assert [user.name for user in want.users] == sorted(document["access"]["users"])


# ---------------------------------------------------------------------------------------------- one table, two sides
BASE_SPEC: dict[str, Any] = {
    "schema_version": 1,
    "identity": {"domain": "lab.internal"},
    "access": {"posture": "prod", "users": {"ops": {"sudo": True, "ssh_keys": ["alice"]}}},
    "platform": {"packages": ["unbound"], "services": {"enable": ["unbound"], "disable": []}},
    "run": {"trigger": "interval", "interval": "30m"},
}


def _user_name(name: str) -> tuple[Callable[[dict], None], Callable[[dict], None]]:
    def on_server(spec: dict) -> None:
        spec["access"]["users"] = {name: spec["access"]["users"]["ops"]}

    def on_agent(document: dict) -> None:
        document["access"]["users"] = {name: document["access"]["users"]["ops"]}

    return on_server, on_agent


def _user_field(field: str, value: Any) -> tuple[Callable[[dict], None], Callable[[dict], None]]:
    def on_server(spec: dict) -> None:
        spec["access"]["users"]["ops"][field] = value

    def on_agent(document: dict) -> None:
        document["access"]["users"]["ops"][field] = value

    return on_server, on_agent


def _both(path: str, value: Any) -> tuple[Callable[[dict], None], Callable[[dict], None]]:
    def put(document: dict) -> None:
        *parents, last = path.split(".")
        for part in parents:
            document = document.setdefault(part, {})
        document[last] = value

    return put, put


def _domain(value: str) -> tuple[Callable[[dict], None], Callable[[dict], None]]:
    def on_agent(document: dict) -> None:
        document["identity"].update(domain=value, fqdn=f"dns1.{value}")

    return _both("identity.domain", value)[0], on_agent


def _hostname(value: str) -> tuple[Callable[[dict], None], Callable[[dict], None]]:
    def on_agent(document: dict) -> None:
        document["identity"].update(hostname=value, fqdn=f"{value}.lab.internal")

    return _both("identity.hostname", value)[0], on_agent


def _repository(value: str) -> tuple[Callable[[dict], None], Callable[[dict], None]]:
    def on_agent(document: dict) -> None:
        document["node"]["type"] = "pve"
        document["config"] = {"pve": {"repository": value}}

    return _both("config.pve.repository", value)[0], on_agent


def _key(value: str) -> str:
    return value  # the key itself: the server reads it in the secrets file, the agent in the resolved spec


VALUES: dict[
    str, tuple[Callable[[str], tuple[Callable[[dict], None], Callable[[dict], None]]], list[str], list[str]]
] = {
    # field: (where the value goes on each side, bad values, good values)
    "user": (
        _user_name,
        [
            "root",
            "sshd",
            "www-data",
            "nobody",
            "messagebus",
            "systemd-network",
            "_apt",
            "unbound",
            "ops\n",
            "Ops",
            "o ps",
            "9ops",
            "a" * 33,
            "",
        ],
        ["ops", "alice", "deploy-1", "a" * 32, "debian"],
    ),
    "group": (
        lambda v: _user_field("groups", [v]),
        ["adm\n", "Adm", "a b", ""],
        ["adm", "sudo", "docker"],
    ),
    "shell": (
        lambda v: _user_field("shell", v),
        ["bash", "/bin/bash\n", "/bin/ba sh", "/bin/sh;id", "/"],
        ["/bin/bash", "/usr/bin/zsh", "/usr/sbin/nologin"],
    ),
    "package": (
        lambda v: _both("platform.packages", [v]),
        ["unbound\n", "Bad", "-x", "a;b", "a b", ""],
        ["unbound", "g++", "libc6.1-dev"],
    ),
    "service": (
        lambda v: _both("platform.services.enable", [v]),
        ["unbound\n", "a b", "../x", "-x", ""],
        ["unbound", "unbound.service", "getty@tty1.service", "sys-kernel-debug.mount"],
    ),
    "domain": (
        _domain,
        [
            "a..b",
            "lab.internal\n",
            "-a.b",
            "a-.b",
            "Lab.Internal",
            "a_b.c",
            ".lab",
            "lab.",
            "a" * 64,
            ("a." * 127) + "ab",
        ],
        ["lab.internal", "a.b.c", "x1.example", "9lab.internal"],
    ),
    "hostname": (
        _hostname,
        ["dns1\n", "Bad Host", "1dns", "dns-", "a" * 64, "dns_1"],
        ["dns1", "a", "host-a"],
    ),
    "interval": (
        lambda v: _both("run.interval", v),
        ["30m\n", "30", "3d", "30s", "59s", "25h", "0m", "1441m", "m", " 30m"],
        ["30m", "1m", "60s", "24h", "1440m", "86400s"],
    ),
    "trigger": (
        lambda v: _both("run.trigger", v),
        ["cron", "interval\n", "Boot"],
        ["interval"],
    ),
    "repository": (
        _repository,
        ["testing", "none\n"],
        ["no-subscription", "enterprise", "none"],
    ),
    "route": (
        lambda v: _both("network.routes", [{"to": v, "via": "10.11.1.254"}]),
        ["10.20.0.1/16", "0.0.0.0/0", "::/0", "10.20.0.0/16\n", "10.20.0.0/33", "net", "fd00::/64", ""],
        ["10.20.0.0/16", "192.168.7.0/24", "10.20.30.40/32"],
    ),
    "dns server": (
        lambda v: _both("network.dns", [v]),
        ["resolver.lab", "10.0.0.1\n", "10.0.0.256", ""],
        ["10.11.1.53", "fd00::53"],
    ),
    "search domain": (
        lambda v: _both("network.search", [v]),
        ["lab.internal\n", "a..b", "Lab.internal", ""],
        ["lab.internal", "x1.example"],
    ),
    "public key": (
        _key,
        [
            KEY + "\n",
            'command="id" ' + KEY,
            "ssh-dss AAAAB3NzaC1kc3MAAACBAP8=",
            KEY.replace("alice@laptop", "a\x00b"),
            KEY.replace("alice@laptop", "a\rb"),
            "ssh-ed25519",
            "",
        ],
        [KEY, KEY.rsplit(" ", 1)[0], spec_support.ALICE],
    ),
}


def _server_refuses(field: str, value: str) -> bool:
    place, _, _ = VALUES[field]
    if field == "public key":
        try:
            Secrets.model_validate({"schema_version": 1, "ssh_keys": {"alice": value}})
        except ValidationError:
            return True
        return False
    spec = copy.deepcopy(BASE_SPEC)
    place(value)[0](spec)  # type: ignore[index]
    try:
        server.Spec.model_validate(spec)
    except ValidationError:
        return True
    return False


def _agent_refuses(field: str, value: str) -> bool:
    place, _, _ = VALUES[field]
    document = spec_document()
    if field == "public key":
        document["access"]["users"]["ops"]["ssh_authorized_keys"] = [value]
    else:
        place(value)[1](document)  # type: ignore[index]
    try:
        desired.read(document)
    except desired.BadSpec:
        return True
    return False


CASES = [
    (field, value, bad)
    for field, (_, bads, goods) in VALUES.items()
    for bad, values in ((True, bads), (False, goods))
    for value in values
]


@pytest.mark.parametrize(
    ("field", "value", "bad"), CASES, ids=[f"{f}-{'bad' if b else 'good'}-{v!r}"[:60] for f, v, b in CASES]
)
def test_the_server_and_the_agent_refuse_the_same_values(field, value, bad):
    assert (_server_refuses(field, value), _agent_refuses(field, value)) == (bad, bad)


def test_the_system_accounts_are_refused_on_both_sides():
    for name in [*sorted(words.SYSTEM_ACCOUNTS), "systemd-anything", "_anything"]:
        assert _server_refuses("user", name) and _agent_refuses("user", name), name


# ---------------------------------------------------------------------------------------------- the words, named
def test_the_agents_patterns_are_the_vocabularys():
    assert desired.NAME is words.LABEL and desired.FQDN is words.DOMAIN
    assert desired.USERNAME is words.USERNAME and desired.GROUP is words.GROUP
    assert desired.PACKAGE is words.PACKAGE and desired.SERVICE is words.SERVICE
    assert desired.SHELL is words.SHELL and desired.KEY is words.PUBLIC_KEY
    assert desired.SCHEMA_VERSION == words.SCHEMA_VERSION == 1
    assert desired.TRIGGERS is words.TRIGGERS and desired.NODE_TYPES is words.NODE_TYPES


PINNED = {
    "LABEL": r"[a-z]([a-z0-9-]{0,61}[a-z0-9])?",
    "DOMAIN": r"(?=.{1,253}\Z)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*",
    "USERNAME": r"[a-z_][a-z0-9_-]{0,31}",
    "GROUP": r"[a-z_][a-z0-9_-]{0,31}",
    "KEY_NAME": r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}",
    "PACKAGE": r"[a-z0-9][a-z0-9+.-]{0,127}",
    "SERVICE": r"[A-Za-z0-9][A-Za-z0-9_.@:-]{0,127}",
    "SHELL": r"/[A-Za-z0-9_/.-]{1,127}",
    "DURATION": r"[1-9][0-9]{0,5}[smh]",
}


def test_the_patterns_are_pinned_and_carry_no_anchors():
    """Every pattern is applied with fullmatch (vocabulary.matches); none carries ^ or $, which let a trailing
    newline through with re.match."""
    patterns = {name: value for name, value in vars(words).items() if isinstance(value, re.Pattern)}
    assert {name: p.pattern for name, p in patterns.items() if name != "PUBLIC_KEY"} == PINNED
    for name, pattern in patterns.items():
        assert not pattern.pattern.startswith("^") and "$" not in pattern.pattern, name
        assert not words.matches(pattern, "x" * 10 + "\n"), name
    assert not words.matches(words.USERNAME, None) and not words.matches(words.USERNAME, ["ops"])


def test_the_servers_model_uses_the_vocabularys_words():
    """The pydantic model repeats three words as Literal types (the JSON Schema needs them): pinned here."""
    assert typing.get_args(server.Run.model_fields["trigger"].annotation) == words.TRIGGERS
    assert typing.get_args(server.PveConfig.model_fields["repository"].annotation) == words.PVE_REPOSITORIES
    assert typing.get_args(server.Spec.model_fields["schema_version"].annotation) == (words.SCHEMA_VERSION,)
    assert tuple(server.TypeConfig.model_fields) == words.NODE_TYPES
    assert server.Run().every == words.DEFAULT_INTERVAL


def test_no_module_matches_a_spec_name_with_re_match():
    """`pattern.match` on an anchored pattern is how `"ops\\n"` got through: the agent and the spec model use
    fullmatch (through vocabulary.matches) only."""
    for folder in ("terravixens/agent", "terravixens/standalone"):
        for path in sorted((ROOT / folder).glob("*.py")):
            text = path.read_text()
            assert not re.search(
                r"\b(NAME|USERNAME|GROUP|PACKAGE|SERVICE|SHELL|FQDN|DOMAIN|KEY|INTERVAL|DURATION|LABEL)"
                r"\.match\(",
                text,
            ), path
            assert "re.match(" not in text, path


def test_a_nodes_fqdn_longer_than_a_dns_name_is_refused_by_the_server(tmp_path):
    """Hostname and domain each valid, 254 characters together: the agent refuses such an fqdn, so the server does
    before serving it."""
    import yaml

    from terravixens.standalone.catalog import CatalogError

    site, secrets = spec_support.standalone_copy(tmp_path)
    spec = tmp_path / "specs" / "jump.yaml"
    data = yaml.safe_load(spec.read_text())
    data["identity"]["domain"] = ".".join(["a" * 63] * 3) + "." + "b" * 57  # 249 characters
    spec.write_text(yaml.safe_dump(data))
    with pytest.raises(CatalogError) as raised:
        load_standalone(site, secrets)
    assert "longer than a DNS name (253): shorten its spec's identity.domain or hostname" in str(raised.value)


def test_the_docs_list_exactly_the_refused_account_names():
    """docs/standalone.md's table names each refused account: the list is the vocabulary's, not a copy that ages."""
    text = (ROOT / "docs/standalone.md").read_text()
    [row] = [line for line in text.splitlines() if line.startswith("| a spec user named like a system account")]
    listed = {name for quoted in re.findall(r"`([^`]+)`", row.split(" | ")[0]) for name in quoted.split()}
    assert listed == {*words.SYSTEM_ACCOUNTS, *(f"{prefix}*" for prefix in words.SYSTEM_PREFIXES)}
