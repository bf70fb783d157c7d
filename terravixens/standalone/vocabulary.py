"""The spec's vocabulary, written once: what the server's model (spec.py, secrets.py, resolve.py) and the node agent
(terravixens/agent/desired.py) both accept — so a value one refuses, the other refuses too (ADR 0052).

    SCHEMA_VERSION, NODE_TYPES, TRIGGERS, DEFAULT_INTERVAL     the resolved spec's fixed words
    LABEL DOMAIN USERNAME GROUP KEY_NAME PACKAGE SERVICE SHELL PUBLIC_KEY DURATION   the patterns
    matches(pattern, value)                                    the only way they are applied: whole text, `str` only
    system_account(name)                                       the accounts a spec never manages (root, sshd, …)
    interval_seconds(text) / interval_problem(value)           run.interval: 1m … 24h, through the runner's parser
    route_problem(to, via), MAX_ROUTES, MAX_DNS, MAX_SEARCH     network.routes, .dns, .search (ADR 0059)

Every pattern is matched with `re.fullmatch`: with `re.match` and `^…$`, `$` also matches before a final newline,
so `"ops\\n"` passed and wrote a sudoers file sudo cannot parse, and `"30m\\n"` crashed the agent after it had
applied changes (issue 26). The patterns carry no anchors at all, so no caller can get that wrong again.

Standard library only (plus terravixens.runner, itself standard library only): the agent's bundle carries this
module to a bare guest (tests/test_agent.py runs the bundle under `python3 -I -S`).
"""

from __future__ import annotations

import ipaddress
import re

from terravixens.runner import parse_duration

SCHEMA_VERSION = 1
NODE_TYPES = ("pve", "vm", "ct")
TRIGGERS = ("boot", "interval", "manual")
DEFAULT_INTERVAL = "30m"
MAX_ROUTES, MAX_DNS, MAX_SEARCH = 16, 3, 6  # network.routes, network.dns (resolv.conf reads 3), network.search
PVE_REPOSITORIES = ("no-subscription", "enterprise", "none")  # config.pve.repository, the first the default
INTERVAL_RANGE = (60, 86_400)  # seconds: converge at most every minute, at least once a day

# A node's name and hostname: a DNS label starting with a letter (the site's DnsName, config/fields.DNS_LABEL).
LABEL = re.compile(r"[a-z]([a-z0-9-]{0,61}[a-z0-9])?")
# A domain (and a node's FQDN, its hostname and domain): labels joined by single dots, 253 characters at most.
DOMAIN = re.compile(r"(?=.{1,253}\Z)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*")
# useradd's default NAME_REGEX on Debian (adduser.conf), at most 32 characters (utmp's limit).
USERNAME = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
GROUP = USERNAME
KEY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")  # a key of ssh_keys in the secrets file
PACKAGE = re.compile(r"[a-z0-9][a-z0-9+.-]{0,127}")  # Debian policy 5.6.1: lowercase, digits, + - .
SERVICE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@:-]{0,127}")  # a systemd unit name (no '/', no space)
SHELL = re.compile(r"/[A-Za-z0-9_/.-]{1,127}")  # an absolute path, nothing a shell or passwd would split
# One OpenSSH public key line: a known type, the base64 blob, an optional comment without control characters. No
# options before the type: the agent writes `authorized_keys`, where options (command=, from=) would change its
# meaning.
PUBLIC_KEY = re.compile(
    r"(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)|sk-ssh-ed25519@openssh\.com|"
    r"sk-ecdsa-sha2-nistp256@openssh\.com) [A-Za-z0-9+/]+={0,3}( [^\x00-\x1f\x7f]{0,200})?"
)
DURATION = re.compile(r"[1-9][0-9]{0,5}[smh]")  # a spec's duration: a unit is required ('30m'; '30' is refused)

# Accounts a spec never manages, whatever their uid on a node (the agent also refuses any existing account outside
# the node's login.defs UID_MIN..UID_MAX): Debian's static base-passwd accounts (/usr/share/base-passwd/passwd.master),
# the accounts a Debian or Ubuntu base image and the common daemons create (adduser --system), and every name with
# the prefixes below — systemd's own accounts, and Debian's convention for new system accounts (`_apt`, `_chrony`).
# A spec user gets a login shell, sudo and an authorized_keys: given to `sshd` or `www-data` it is a login for a
# daemon's account; given to `root` it replaces the operator's keys.
SYSTEM_ACCOUNTS = frozenset(
    {
        # base-passwd
        "root",
        "daemon",
        "bin",
        "sys",
        "sync",
        "games",
        "man",
        "lp",
        "mail",
        "news",
        "uucp",
        "proxy",
        "www-data",
        "backup",
        "list",
        "irc",
        "gnats",
        "nobody",
        # Debian/Ubuntu base images and common daemons
        "messagebus",
        "sshd",
        "syslog",
        "uuidd",
        "tcpdump",
        "tss",
        "polkitd",
        "avahi",
        "dnsmasq",
        "statd",
        "ntp",
        "chrony",
        "postfix",
        "unbound",
        "bind",
        "landscape",
        "pollinate",
        "usbmux",
        "lxd",
        "fwupd-refresh",
        "dhcpcd",
        "sssd",
        "ceph",
    }
)
SYSTEM_PREFIXES = ("systemd-", "_")


def matches(pattern: re.Pattern[str], value: object) -> bool:
    """The whole of `value` (text only) is one `pattern`: no trailing newline, nothing after it."""
    return isinstance(value, str) and pattern.fullmatch(value) is not None


def system_account(name: str) -> bool:
    return name in SYSTEM_ACCOUNTS or name.startswith(SYSTEM_PREFIXES)


def user_problem(name: object) -> str | None:
    """Why `name` cannot be a spec user, or None: the server's and the agent's one rule for names."""
    if not isinstance(name, str) or not matches(USERNAME, name):
        return (
            f"{str(name)[:64]!r} is not a valid user name (lowercase, up to 32 characters, starting with a letter or "
            f"'_'), e.g. 'ops'"
        )
    if system_account(name):
        return (
            f"{name!r} is a system account: a spec manages regular login accounts only (docs/standalone.md lists "
            f"the refused names); pick another name, e.g. 'ops'"
        )
    return None


def interval_seconds(text: object) -> int:
    """A spec duration in seconds ('30m' -> 1800); ValueError (one line) for anything else."""
    if not isinstance(text, str) or not matches(DURATION, text):
        raise ValueError(f"{str(text)[:32]!r} is not a duration: write a number and s, m or h, e.g. '30m'")
    return parse_duration(text)


def interval_problem(value: object) -> str | None:
    """Why `value` cannot be run.interval, or None."""
    try:
        seconds = interval_seconds(value)
    except ValueError as error:
        return str(error)
    if not INTERVAL_RANGE[0] <= seconds <= INTERVAL_RANGE[1]:
        return f"{value!r} is out of range: converge between every minute (1m) and once a day (24h)"
    return None


def route_problem(to: object, via: object) -> str | None:
    """Why {to, via} cannot be a static route of network.routes, or None: `to` a network in CIDR notation with no
    host bits (not a default route: the node's gateway is that), `via` an address of the same family."""
    try:
        network = ipaddress.ip_network(str(to), strict=True) if isinstance(to, str) else None
    except ValueError:
        network = None
    if network is None:
        return f"to {str(to)[:64]!r} is not a network in CIDR notation with no host bits set, e.g. '10.20.0.0/16'"
    if network.prefixlen == 0:
        return f"to {to!r} is a default route: the node's gateway is the default route; route a narrower network"
    try:
        gateway = ipaddress.ip_address(via) if isinstance(via, str) else None
    except ValueError:
        gateway = None
    if gateway is None:
        return f"via {str(via)[:64]!r} is not an IP address, e.g. '10.11.1.254'"
    if gateway.version != network.version:
        return f"via {via!r} is IPv{gateway.version} and to {to!r} is IPv{network.version}: use one family"
    return None
