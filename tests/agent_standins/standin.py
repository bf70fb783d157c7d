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
- ip -j link show: iproute2's JSON list of links (ifindex, ifname, link_type, address), from links.json (a VM with
  lo and ens18 when absent);
- netplan generate / apply: the YAML files of /etc/netplan (and /run, /lib) read in lexicographic order of their
  names, later files adding to earlier ones as netplan-generate(8) says (scalars replaced, sequences concatenated:
  a second file's addresses are added, not substituted); a file that does not parse, or an ethernet without a
  mapping, is refused as netplan does (exit 1, nothing applied); apply records what is up in network.json;
- ifup IFACE / ifdown [--force] IFACE: /etc/network/interfaces and, when it sources them, the files of
  /etc/network/interfaces.d; an interface with two stanzas is refused ('duplicate interface', exit 1), one with none
  is 'unknown interface' (exit 1); ifup records the stanza's address, gateway and `up ip route` lines in network.json,
  ifdown removes them (an interface that is not up: a message, exit 0 with --force).
What a real node adds and this does not model: dependencies, conffile prompts, units' own start failures, PAM,
shadow passwords, nscd, the kernel's addresses and routes themselves (network.json stands for them; a test's
loopback proxy reads it to decide whether "the node" still reaches its spec server). Every call is appended to
var/lib/standin/calls.log under the root.
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
LINKS, NETWORK = STATE / "links.json", STATE / "network.json"
DEFAULT_LINKS = [
    {"ifindex": 1, "ifname": "lo", "link_type": "loopback", "address": "00:00:00:00:00:00"},
    {"ifindex": 2, "ifname": "ens18", "link_type": "ether", "address": "bc:24:11:5e:00:01"},
]
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


def ip(args: list[str]) -> int:
    if args[:3] != ["-j", "link", "show"]:
        print(f"stand-in ip: only `ip -j link show` is modelled, not {args}", file=sys.stderr)
        return 1
    print(json.dumps(_load(LINKS, DEFAULT_LINKS)))
    return 0


def _merge(old, new):
    """netplan-generate(8): mappings merged, sequences concatenated, scalars replaced by the later file."""
    if isinstance(old, dict) and isinstance(new, dict):
        merged = dict(old)
        for key, value in new.items():
            merged[key] = _merge(old[key], value) if key in old else value
        return merged
    if isinstance(old, list) and isinstance(new, list):
        return old + new
    return new


def _netplan() -> dict | str:
    import yaml

    files: dict[str, Path] = {}
    for folder in ("lib/netplan", "etc/netplan", "run/netplan"):  # a later folder shadows a same-named file
        for path in sorted((ROOT / folder).glob("*.yaml")):
            files[path.name] = path
    merged: dict = {}
    for name in sorted(files):
        try:
            document = yaml.safe_load(files[name].read_text()) or {}
        except yaml.YAMLError as error:
            return f"{files[name]}: {str(error).splitlines()[0]}"
        merged = _merge(merged, document)
    ethernets = merged.get("network", {}).get("ethernets", {})
    for name, settings in ethernets.items():
        if not isinstance(settings, dict):
            return f"Error in network definition: {name}: expected mapping"
    return ethernets


def netplan(args: list[str]) -> int:
    ethernets = _netplan()
    if isinstance(ethernets, str):
        print(ethernets, file=sys.stderr)
        return 1
    if args[:1] == ["apply"]:
        up = {
            name: {
                "addresses": settings.get("addresses", []),
                "routes": settings.get("routes", []),
                "nameservers": settings.get("nameservers", {}),
            }
            for name, settings in ethernets.items()
        }
        _save(NETWORK, {"applied": up})
    return 0


def _stanzas() -> dict[str, list[list[str]]] | str:
    main = ROOT / "etc/network/interfaces"
    files = [main] if main.exists() else []
    if main.exists() and any(line.strip().startswith("source") for line in main.read_text().splitlines()):
        files += sorted(p for p in (ROOT / "etc/network/interfaces.d").glob("*") if p.is_file())
    found: dict[str, list[list[str]]] = {}
    for path in files:
        current: list[str] | None = None
        for number, line in enumerate(path.read_text().splitlines(), 1):
            words = line.split()
            if words[:1] == ["iface"]:
                if words[1] in found:
                    return f"{path}:{number}: duplicate interface"
                current = []
                found[words[1]] = [current]
            elif words[:1] in (["auto"], ["source"], ["source-directory"], ["allow-hotplug"]) or not words:
                current = None if words else current
            elif current is not None:
                current.append(line.strip())
    return found


def ifup(args: list[str]) -> int:
    name = next(a for a in args if not a.startswith("-"))
    stanzas = _stanzas()
    if isinstance(stanzas, str):
        print(stanzas, file=sys.stderr)
        return 1
    if name not in stanzas:
        print(f"ifup: unknown interface {name}", file=sys.stderr)
        return 1
    options = stanzas[name][0]
    state = _load(NETWORK, {"applied": {}})
    state["applied"][name] = {
        "addresses": [o.split()[1] for o in options if o.startswith("address ")],
        "gateway": next((o.split()[1] for o in options if o.startswith("gateway ")), None),
        "routes": [o.split()[4:7:2] for o in options if o.startswith("up ip route replace ")],
    }
    _save(NETWORK, state)
    return 0


def ifdown(args: list[str]) -> int:
    name = next(a for a in args if not a.startswith("-"))
    state = _load(NETWORK, {"applied": {}})
    if name not in state["applied"]:
        print(f"ifdown: interface {name} not configured", file=sys.stderr)
        return 0 if "--force" in args else 1
    del state["applied"][name]
    _save(NETWORK, state)
    return 0


TOOLS = {
    "dpkg-query": dpkg_query,
    "apt-get": apt_get,
    "systemctl": systemctl,
    "useradd": useradd,
    "usermod": usermod,
    "hostname": hostname,
    "ssh-keygen": ssh_keygen,
    "ip": ip,
    "netplan": netplan,
    "ifup": ifup,
    "ifdown": ifdown,
}

if __name__ == "__main__":
    STATE.mkdir(parents=True, exist_ok=True)
    with CALLS.open("a") as log:
        log.write(json.dumps(sys.argv[1:]) + "\n")
    sys.exit(TOOLS[sys.argv[1]](sys.argv[2:]))
