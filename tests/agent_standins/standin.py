"""Stand-ins for the managers the node agent calls, acting on a throwaway root ($TERRAVIXENS_AGENT_ROOT), never on
this machine. Invoked as `standin.py NAME ARGS…` by the wrappers tests/agent_support.py writes (one per name).

Faithful to the real tools where the agent reads them (Debian 12/13, measured and from the manuals):
- dpkg-query --show --showformat=FMT NAMES: one line per installed name (`${db:Status-Abbrev}` is 'ii '); a name
  dpkg does not know: 'dpkg-query: no packages found matching NAME' on stderr, exit 1, the others still printed;
- apt-get install: 'E: Unable to locate package NAME', exit 100, nothing installed (names 'missing-*' here are not in
  the archive); a package NAME ships NAME.service, as unbound and qemu-guest-agent do;
- systemctl is-enabled UNIT: the state word on stdout, exit 0 when enabled/static, 1 otherwise; an unknown unit:
  'Failed to get unit file state for UNIT: No such file or directory' on stderr, exit 1; is-active --quiet: exit 0
  active, 3 inactive; enable/disable [--now]; a unit file without [Install] is 'static';
- useradd / usermod: /etc/passwd and /etc/group lines; 'useradd: group 'G' does not exist' exit 6, 'useradd: user
  'U' already exists' exit 9.
What a real node adds and this does not model: dependencies, conffile prompts, units' own start failures, PAM,
shadow passwords, nscd. Every call is appended to var/lib/standin/calls.log under the root.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
from pathlib import Path

ROOT = Path(os.environ["TERRAVIXENS_AGENT_ROOT"])
STATE = ROOT / "var/lib/standin"
PACKAGES, UNITS, CALLS = STATE / "packages.json", STATE / "units.json", STATE / "calls.log"
ENABLED_OK = {"enabled", "static"}


def _load(path: Path, default):
    return json.loads(path.read_text()) if path.exists() else default


def _save(path: Path, value) -> None:
    path.write_text(json.dumps(value, indent=1, sort_keys=True))


def _unit(name: str) -> str:
    return name if "." in name else f"{name}.service"


def _unit_file(unit: str) -> Path | None:
    for folder in ("etc/systemd/system", "usr/lib/systemd/system"):
        path = ROOT / folder / unit
        if path.exists():
            return path
    return None


def dpkg_query(args: list[str]) -> int:
    names = [a for a in args if not a.startswith("-")]
    installed = _load(PACKAGES, [])
    code = 0
    for name in names:
        if name in installed:
            print(f"{name}\tii ")
        else:
            print(f"dpkg-query: no packages found matching {name}", file=sys.stderr)
            code = 1
    return code


def apt_get(args: list[str]) -> int:
    if "update" in args:
        return 0
    names = args[args.index("install") + 1 :]
    unknown = [n for n in names if n.startswith("missing-")]
    if unknown:
        print("Reading package lists...", flush=True)
        print(f"E: Unable to locate package {unknown[0]}", file=sys.stderr)
        return 100
    installed = _load(PACKAGES, [])
    for name in names:
        if name not in installed:
            installed.append(name)
            unit = ROOT / "usr/lib/systemd/system" / f"{name}.service"
            unit.parent.mkdir(parents=True, exist_ok=True)
            unit.write_text(
                f"[Unit]\nDescription={name}\n[Service]\nExecStart=/usr/sbin/{name}\n[Install]\n"
                "WantedBy=multi-user.target\n"
            )
    _save(PACKAGES, sorted(installed))
    return 0


def systemctl(args: list[str]) -> int:
    states = _load(UNITS, {})
    verb, rest = args[0], [a for a in args[1:] if not a.startswith("-")]
    if verb == "daemon-reload":
        return 0
    unit = _unit(rest[0])
    path = _unit_file(unit)
    state = states.get(unit, {"enabled": False, "active": False})
    if verb == "is-enabled":
        if path is None:
            print(f"Failed to get unit file state for {unit}: No such file or directory", file=sys.stderr)
            return 1
        word = "enabled" if state["enabled"] else ("disabled" if "[Install]" in path.read_text() else "static")
        print(word)
        return 0 if word in ENABLED_OK else 1
    if verb == "is-active":
        if "--quiet" not in args:
            print("active" if state["active"] else "inactive")
        return 0 if state["active"] else 3
    if path is None:
        print(f"Failed to {verb} unit: Unit file {unit} does not exist.", file=sys.stderr)
        return 5 if verb == "try-reload-or-restart" else 1
    if verb == "try-reload-or-restart":
        return 0
    now = "--now" in args
    if verb == "enable":
        state["enabled"] = "[Install]" in path.read_text()
        state["active"] = state["active"] or now
    elif verb == "disable":
        state["enabled"] = False
        state["active"] = state["active"] and not now
    else:
        print(f"Unknown command verb {verb}.", file=sys.stderr)
        return 1
    states[unit] = state
    _save(UNITS, states)
    return 0


def _lines(name: str) -> list[list[str]]:
    return [line.split(":") for line in (ROOT / "etc" / name).read_text().splitlines() if line]


def _write(name: str, rows: list[list[str]]) -> None:
    (ROOT / "etc" / name).write_text("".join(":".join(row) + "\n" for row in rows))


def _join(user: str, groups: list[str]) -> int:
    rows = _lines("group")
    known = {row[0] for row in rows}
    for group in groups:
        if group not in known:
            print(f"useradd: group '{group}' does not exist", file=sys.stderr)
            return 6
    for row in rows:
        members = [m for m in row[3].split(",") if m]
        if row[0] in groups and user not in members:
            row[3] = ",".join([*members, user])
    _write("group", rows)
    return 0


def _option(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


def useradd(args: list[str]) -> int:
    name, passwd = args[-1], _lines("passwd")
    if any(row[0] == name for row in passwd):
        print(f"useradd: user '{name}' already exists", file=sys.stderr)
        return 9
    groups = (_option(args, "--groups") or "").split(",") if "--groups" in args else []
    if _join(name, groups):
        return 6
    uid = max([999] + [int(row[2]) for row in passwd if 1000 <= int(row[2]) < 60000]) + 1
    passwd.append([name, "x", str(uid), str(uid), "", f"/home/{name}", _option(args, "--shell") or "/bin/sh"])
    _write("passwd", passwd)
    _write("group", [*_lines("group"), [name, "x", str(uid), ""]])
    (ROOT / "home" / name).mkdir(parents=True, exist_ok=True)
    return 0


def usermod(args: list[str]) -> int:
    name, passwd = args[-1], _lines("passwd")
    if not any(row[0] == name for row in passwd):
        print(f"usermod: user '{name}' does not exist", file=sys.stderr)
        return 6
    if "--shell" in args:
        for row in passwd:
            if row[0] == name:
                row[6] = _option(args, "--shell") or row[6]
        _write("passwd", passwd)
    if "--groups" in args:
        return _join(name, (_option(args, "--groups") or "").split(","))
    return 0


def hostname(args: list[str]) -> int:
    (ROOT / "run").mkdir(exist_ok=True)
    (ROOT / "run/hostname").write_text(args[0] + "\n")
    return 0


def ssh_keygen(args: list[str]) -> int:
    prefix = Path(_option(args, "-f") or "/")
    if prefix.resolve() != ROOT.resolve():
        print(f"stand-in ssh-keygen: -f {prefix} is not the throwaway root", file=sys.stderr)
        return 1
    for kind in ("rsa", "ecdsa", "ed25519"):
        key = ROOT / "etc/ssh" / f"ssh_host_{kind}_key"
        if not key.exists():
            key.parent.mkdir(parents=True, exist_ok=True)
            key.write_text(secrets.token_hex(16))
    return 0


TOOLS = {
    "dpkg-query": dpkg_query,
    "apt-get": apt_get,
    "systemctl": systemctl,
    "useradd": useradd,
    "usermod": usermod,
    "hostname": hostname,
    "ssh-keygen": ssh_keygen,
}

if __name__ == "__main__":
    STATE.mkdir(parents=True, exist_ok=True)
    with CALLS.open("a") as log:
        log.write(json.dumps(sys.argv[1:]) + "\n")
    sys.exit(TOOLS[sys.argv[1]](sys.argv[2:]))
