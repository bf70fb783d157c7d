"""The node's accounts as the agent reads them (/etc/passwd, /etc/group, /etc/login.defs under the root), and the
account rule: a spec user is a regular login account — never root, never a system account (ADR 0052).

The names a spec never manages (root, sshd, www-data, systemd-*, _apt, …) are refused before anything changes, by
the server and the agent alike (terravixens/standalone/vocabulary.py). What only the node knows is checked here: a
spec user that already exists on the node must have a uid in the node's login range, UID_MIN..UID_MAX of its
login.defs and outside SYS_UID_MIN..SYS_UID_MAX — so `ops` created by a package as a system account (or `toor`
with uid 0) is not given a login shell, sudo and keys. Without a login.defs (or a key in it) shadow's own defaults
apply, as useradd does on Debian: UID_MIN 1000, UID_MAX 60000, SYS_UID_MIN 101, SYS_UID_MAX UID_MIN - 1.
"""

from __future__ import annotations

from dataclasses import dataclass

from terravixens.agent.system import Node

LOGIN_DEFS = "/etc/login.defs"


@dataclass(frozen=True)
class Account:
    name: str
    uid: int
    gid: int
    home: str
    shell: str


@dataclass(frozen=True)
class LoginRange:
    uid_min: int = 1000
    uid_max: int = 60000
    sys_uid_min: int = 101
    sys_uid_max: int = 999

    def regular(self, uid: int) -> bool:
        return uid != 0 and self.uid_min <= uid <= self.uid_max and not self.sys_uid_min <= uid <= self.sys_uid_max

    def refusal(self, account: Account) -> str | None:
        """Why a spec cannot manage this existing account, or None (one line)."""
        if self.regular(account.uid):
            return None
        return (
            f"user {account.name} exists on this node as a system account (uid {account.uid}; regular accounts have "
            f"uids {self.uid_min}-{self.uid_max} outside {self.sys_uid_min}-{self.sys_uid_max}, {LOGIN_DEFS}): "
            f"a spec manages regular login accounts only; give the spec's user another name"
        )


def _number(text: str) -> int | None:
    """A login.defs number as shadow's getdef reads it (strtol, base 0): 1000, 0x3e8, 01750."""
    try:
        if text.lower().startswith("0x"):
            return int(text[2:], 16)
        if text.startswith("0") and len(text) > 1:
            return int(text[1:], 8)
        return int(text, 10)
    except ValueError:
        return None


def login_range(node: Node) -> LoginRange:
    values: dict[str, int] = {}
    for line in (node.read(LOGIN_DEFS) or "").splitlines():
        words = line.split()
        if len(words) >= 2 and not words[0].startswith("#"):
            number = _number(words[1])
            if number is not None:
                values[words[0]] = number
    uid_min = values.get("UID_MIN", LoginRange.uid_min)
    return LoginRange(
        uid_min=uid_min,
        uid_max=values.get("UID_MAX", LoginRange.uid_max),
        sys_uid_min=values.get("SYS_UID_MIN", LoginRange.sys_uid_min),
        sys_uid_max=values.get("SYS_UID_MAX", uid_min - 1),
    )


def accounts(node: Node) -> dict[str, Account]:
    """/etc/passwd under the root (name:x:uid:gid:gecos:home:shell)."""
    found = {}
    for line in (node.read("/etc/passwd") or "").splitlines():
        parts = line.split(":")
        if len(parts) == 7 and parts[2].isdigit() and parts[3].isdigit():
            found[parts[0]] = Account(parts[0], int(parts[2]), int(parts[3]), parts[5], parts[6])
    return found


def memberships(node: Node) -> dict[str, set[str]]:
    """/etc/group under the root (name:x:gid:members): each user's supplementary groups."""
    groups: dict[str, set[str]] = {}
    for line in (node.read("/etc/group") or "").splitlines():
        parts = line.split(":")
        if len(parts) == 4:
            for member in filter(None, parts[3].split(",")):
                groups.setdefault(member, set()).add(parts[0])
    return groups


def refusals(node: Node, names: list[str]) -> dict[str, str]:
    """The spec users (by name) that exist on the node and are not regular accounts: why, per name."""
    present, span = accounts(node), login_range(node)
    found = {name: span.refusal(present[name]) for name in names if name in present}
    return {name: why for name, why in found.items() if why}
