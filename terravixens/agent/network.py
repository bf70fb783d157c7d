"""The spec's `network` on the node: addresses, static routes and DNS (issue 30 item 3, ADR 0059).

What is written, per node type and what the image uses:

    vm, netplan (/etc/netplan exists: Ubuntu, Debian 13 cloud images)
        /etc/netplan/90-terravixens.yaml (0600): each NIC by name and MAC, its address, the default route via
        the first gateway, the routes, the DNS servers and search domains (systemd-resolved takes them)
        apply: netplan generate, then netplan apply
    vm, ifupdown (/etc/network/interfaces: Debian 12 cloud images)
        /etc/network/interfaces.d/90-terravixens (stanzas; routes as `up ip route replace …`), /etc/resolv.conf
        apply: ifdown each NIC with the files it came up with, then ifup with the new ones
    both vm kinds: cloud-init's own file (50-cloud-init.yaml, or interfaces.d/50-cloud-init) is moved to
        /var/lib/terravixens/network/ (it would add its addresses to ours: netplan concatenates lists, ifupdown
        refuses a second stanza), and /etc/cloud/cloud.cfg.d/99-terravixens-network.cfg turns cloud-init's network
        configuration off so it does not come back at the next new instance
    ct (a container's own files, Proxmox VE writes them at each start unless told not to)
        /etc/network/interfaces (the whole file: lo and eth0…ethN) with /etc/network/.pve-ignore.interfaces,
        /etc/resolv.conf with /etc/.pve-ignore.resolv.conf (pct's own convention: PVE leaves such files alone)
        apply: ifdown / ifup as above
    pve: nothing (a nested Proxmox VE host's network is its bridges, the host's own)

Planning compares each file with what it should hold: a node in line plans nothing and a second run changes
nothing. A change is one transaction: the spec server of node.env must answer first (else nothing is changed: the
agent changes the network only when it can tell the change kept the node reachable); the files are written
(through the no-follow walk of system.py) and applied; then the spec server must answer again within
SETTLE_SECONDS. If the apply fails or the server stays silent, the previous files are put back and applied again,
and the section fails saying so: the agent never leaves a node cut off by its own change. SIGHUP is ignored during
the transaction (a `spec push` whose ssh session the change cuts must not kill the agent half way).
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from terravixens.agent.change import Change, refused
from terravixens.agent.desired import Desired, Network, Route
from terravixens.agent.system import Node, Refused
from terravixens.inputs import InputError
from terravixens.specclient import envfile
from terravixens.specclient.fetch import answers

MANAGED = "# terravixens: managed by the agent from the spec (ADR 0059); edits are replaced\n"
NETPLAN_DIR = "/etc/netplan"
NETPLAN_FILE = "/etc/netplan/90-terravixens.yaml"
CLOUD_INIT_NETPLAN = "/etc/netplan/50-cloud-init.yaml"
INTERFACES = "/etc/network/interfaces"
INTERFACES_DROP_IN = "/etc/network/interfaces.d/90-terravixens"
CLOUD_INIT_INTERFACES = "/etc/network/interfaces.d/50-cloud-init"
CLOUD_INIT_OFF = "/etc/cloud/cloud.cfg.d/99-terravixens-network.cfg"
CLOUD_INIT_OFF_TEXT = (
    "# terravixens: the agent configures the network from the spec (ADR 0059)\nnetwork: {config: disabled}\n"
)
RESOLV = "/etc/resolv.conf"
PVE_IGNORE_INTERFACES = "/etc/network/.pve-ignore.interfaces"
PVE_IGNORE_RESOLV = "/etc/.pve-ignore.resolv.conf"
KEPT = "/var/lib/terravixens/network"
# How long the spec server has to answer after a change (addresses settle, routes come up), and each attempt.
SETTLE_SECONDS, ATTEMPT_SECONDS, PAUSE_SECONDS = 30.0, 5.0, 1.0
# Interfaces `ip -j link` lists that are not the VM's NICs.
VIRTUAL = ("lo", "veth", "docker", "br-", "virbr", "vmbr", "tap", "tun", "wg", "cni", "flannel", "cilium", "vxlan")


@dataclass
class Plan:
    """The files the network should be, the names to move aside, and how to bring it up and down."""

    renderer: str  # netplan, ifupdown, container
    names: tuple[str, ...]
    files: dict[str, tuple[str, int]] = field(default_factory=dict)
    moved: tuple[str, ...] = ()


def kept(path: str) -> str:
    """Where cloud-init's file `path` is kept once moved aside."""
    return f"{KEPT}/{path.rsplit('/', 1)[1]}"


@dataclass(frozen=True)
class Link:
    name: str
    mac: str


def _links(node: Node) -> list[Link] | str:
    """The VM's ethernet NICs in the order the kernel numbered them (ifindex: Proxmox's net0, net1, …)."""
    ran = node.call("ip", "-j", "link", "show")
    if not ran.ok:
        return f"cannot list the network interfaces: {ran.reason}"
    try:
        listed = json.loads(ran.stdout)
        links = sorted(
            (item["ifindex"], str(item["ifname"]), str(item.get("address", "")))
            for item in listed
            if item.get("link_type") == "ether" and not str(item["ifname"]).startswith(VIRTUAL)
        )
    except (ValueError, KeyError, TypeError):
        return "`ip -j link show` did not print its JSON list of links"
    return [Link(name, mac) for _, name, mac in links]


def _quoted(value: str) -> str:
    return json.dumps(value)  # a YAML double-quoted scalar


def netplan(network: Network, links: list[Link]) -> str:
    lines = [MANAGED.rstrip("\n"), "network:", "  version: 2", "  ethernets:"]
    default = next((i for i, interface in enumerate(network.interfaces) if interface.gateway), None)
    for index, (interface, link) in enumerate(zip(network.interfaces, links, strict=False)):
        lines += [f"    {link.name}:"]
        if link.mac:
            lines += [
                "      match:",
                f"        macaddress: {_quoted(link.mac)}",
                f"      set-name: {_quoted(link.name)}",
            ]
        lines += ["      addresses:", f"        - {_quoted(interface.address)}"]
        routes = [("default", interface.gateway)] if index == default and interface.gateway else []
        routes += [(route.to, route.via) for route in _routes_of(network, index)]
        if routes:
            lines += ["      routes:"]
            for to, via in routes:
                lines += [f"        - to: {_quoted(to)}", f"          via: {_quoted(str(via))}"]
        if index == 0 and (network.dns or network.search):
            lines += ["      nameservers:"]
            if network.dns:
                lines += ["        addresses:", *(f"          - {_quoted(server)}" for server in network.dns)]
            if network.search:
                lines += ["        search:", *(f"          - {_quoted(domain)}" for domain in network.search)]
    return "\n".join(lines) + "\n"


def _routes_of(network: Network, index: int) -> list[Route]:
    """The routes whose router is on interface `index`'s subnet (each on the first such interface)."""
    subnets = [ipaddress.ip_interface(interface.address).network for interface in network.interfaces]
    return [
        route
        for route in network.routes
        if next(i for i, subnet in enumerate(subnets) if ipaddress.ip_address(route.via) in subnet) == index
    ]


def stanzas(network: Network, names: tuple[str, ...]) -> str:
    """ifupdown's stanzas (interfaces(5)): one per NIC, routes as `up`/`down` commands on their interface."""
    blocks = []
    default = next((i for i, interface in enumerate(network.interfaces) if interface.gateway), None)
    for index, (interface, name) in enumerate(zip(network.interfaces, names, strict=False)):
        family = "inet6" if ipaddress.ip_interface(interface.address).version == 6 else "inet"
        block = [f"auto {name}", f"iface {name} {family} static", f"    address {interface.address}"]
        if index == default and interface.gateway:
            block.append(f"    gateway {interface.gateway}")
        for route in _routes_of(network, index):
            block.append(f"    up ip route replace {route.to} via {route.via} dev {name}")
            block.append(f"    down ip route del {route.to} via {route.via} dev {name} || true")
        blocks.append("\n".join(block) + "\n")
    return "\n".join(blocks)


def resolv_conf(network: Network) -> str:
    search = [f"search {' '.join(network.search)}"] if network.search else []
    return MANAGED + "\n".join([*search, *(f"nameserver {server}" for server in network.dns)]) + "\n"


def plan_files(node: Node, want: Desired) -> Plan | str | None:
    """What the node's network files should hold; None when the agent leaves this node's network alone; a string
    when it cannot tell (the reason)."""
    network = want.network
    if network is None or want.node_type not in ("vm", "ct"):
        return None
    dns = bool(network.dns or network.search)
    if want.node_type == "ct":
        names = tuple(f"eth{index}" for index in range(len(network.interfaces)))  # the names the stacks give them
        plan = Plan("container", names)
        text = MANAGED + "auto lo\niface lo inet loopback\n\n" + stanzas(network, names)
        plan.files[INTERFACES] = (text, 0o644)
        plan.files[PVE_IGNORE_INTERFACES] = ("", 0o644)
        if dns:
            plan.files[RESOLV] = (resolv_conf(network), 0o644)
            plan.files[PVE_IGNORE_RESOLV] = ("", 0o644)
        return plan
    links = _links(node)
    if isinstance(links, str):
        return links
    if len(links) < len(network.interfaces):
        return (
            f"the VM has {len(links)} ethernet interface(s) ({', '.join(link.name for link in links) or 'none'}) "
            f"and the site gives it {len(network.interfaces)} address(es): check the VM's network devices"
        )
    names = tuple(link.name for link in links[: len(network.interfaces)])
    if node.mode(NETPLAN_DIR) is not None:
        plan = Plan("netplan", names, moved=(CLOUD_INIT_NETPLAN,))
        plan.files[NETPLAN_FILE] = (netplan(network, links), 0o600)
    elif node.mode(INTERFACES) is not None:
        plan = Plan("ifupdown", names, moved=(CLOUD_INIT_INTERFACES,))
        plan.files[INTERFACES_DROP_IN] = (MANAGED + stanzas(network, names), 0o644)
        if dns:
            plan.files[RESOLV] = (resolv_conf(network), 0o644)
    else:
        return f"neither netplan ({NETPLAN_DIR}) nor ifupdown ({INTERFACES}) is on this VM: the agent knows no other"
    plan.files[CLOUD_INIT_OFF] = (CLOUD_INIT_OFF_TEXT, 0o644)
    return plan


class NetworkSection:
    name = "network"

    def plan(self, node: Node, want: Desired) -> list[Change]:
        planned = plan_files(node, want)
        if planned is None:
            return []
        if isinstance(planned, str):
            return [refused("configure the network", planned)]
        try:
            paths = [*planned.files, *planned.moved, *map(kept, planned.moved)]
            before = {path: (node.read(path), node.mode(path)) for path in paths}
        except Refused as error:
            return [refused("configure the network", str(error))]
        changed = [
            path for path, (text, mode) in planned.files.items() if before[path][0] != text or before[path][1] != mode
        ]
        moved = [path for path in planned.moved if before[path][0] is not None]
        if not changed and not moved:
            return []
        words = [f"{'rewrite' if before[path][0] is not None else 'create'} {path}" for path in changed]
        words += [f"move cloud-init's {path} to {KEPT}" for path in moved]
        apply = "netplan apply" if planned.renderer == "netplan" else f"ifdown/ifup {' '.join(planned.names)}"
        text = f"{'; '.join(words)}; {apply} (the spec server must answer after it, else rolled back)"
        return [Change(text, lambda: Transaction(node, planned, before, changed, moved).run())]


@dataclass
class Transaction:
    node: Node
    plan: Plan
    before: dict[str, tuple[str | None, int | None]]
    changed: list[str]
    moved: list[str]

    def run(self) -> str | None:
        target = self._target()
        if isinstance(target, str):
            return target
        server, reach = target
        silent = reach(ATTEMPT_SECONDS)
        if silent is not None:
            return (
                f"the spec server {server} does not answer before the change ({silent}): the agent changes the "
                f"network only when it can tell the change kept the node reachable; nothing changed"
            )
        with _no_hangup():
            self._down()
            try:
                self._write()
                failure = self._up() or self._settled(server, reach)
            except (Refused, OSError) as error:
                failure = f"writing the network files failed ({getattr(error, 'strerror', None) or error})"
            if failure is None:
                return None
            self._down()
            self._restore()
            again = self._up() or self._settled(server, reach)
        state = "the previous network is back" if again is None else f"restoring it failed too: {again}"
        return f"{failure}: the previous files are restored and applied again ({state})"

    def _target(self) -> tuple[str, Callable[[float], str | None]] | str:
        try:
            text = self.node.read(envfile.DEFAULT_PATH.as_posix())
        except Refused as error:
            return f"cannot read node.env ({error}): nothing changed"
        if text is None:
            return (
                f"no {envfile.DEFAULT_PATH} names a spec server to check the change against (the L2 stacks write "
                f"it): nothing changed"
            )
        try:
            env = envfile.parse(text, envfile.DEFAULT_PATH)
        except InputError as error:
            return f"{str(error).splitlines()[-1].strip()}: nothing changed"
        ca_file = self.node.path(env.ca_file.as_posix()) if env.ca_file else None
        return env.server, lambda timeout: answers(env.server, ca_file, env.ca_pem, timeout)

    def _settled(self, server: str, reach: Callable[[float], str | None]) -> str | None:
        deadline = time.monotonic() + SETTLE_SECONDS
        while True:
            silent = reach(min(ATTEMPT_SECONDS, max(0.1, deadline - time.monotonic())))
            if silent is None:
                return None
            if time.monotonic() + PAUSE_SECONDS >= deadline:
                return f"the spec server {server} did not answer within {SETTLE_SECONDS:g} s of the change ({silent})"
            time.sleep(PAUSE_SECONDS)

    def _write(self) -> None:
        for path in self.moved:
            text, mode = self.before[path]
            if text is not None:
                self.node.write(kept(path), text, 0o600)
                self.node.remove(path)
        for path in self.changed:
            text, mode = self.plan.files[path]
            self.node.write(path, text, mode)

    def _restore(self) -> None:
        for path in [*self.changed, *self.moved, *map(kept, self.moved)]:
            text, mode = self.before[path]
            if text is None:
                self.node.remove(path)
            else:
                self.node.write(path, text, mode if mode is not None else 0o644)

    def _down(self) -> None:
        if self.plan.renderer == "netplan":
            return
        for name in self.plan.names:  # with the files it came up with: ifdown reads them
            self.node.call("ifdown", "--force", name)  # an interface that is not up is no failure

    def _up(self) -> str | None:
        if self.plan.renderer == "netplan":
            for step in (("netplan", "generate"), ("netplan", "apply")):
                ran = self.node.call(*step)
                if not ran.ok:
                    return f"{' '.join(step)} failed: {ran.reason}"
            return None
        for name in self.plan.names:
            ran = self.node.call("ifup", name)
            if not ran.ok:
                return f"ifup {name} failed: {ran.reason}"
        return None


@contextlib.contextmanager
def _no_hangup() -> Iterator[None]:
    try:
        previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    except ValueError:  # not the main thread: nothing to change
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGHUP, previous)
