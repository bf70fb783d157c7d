"""A spec: what a standalone node converges to in `config` — "platform ready", not applications (ADR 0018).

One file per spec, `<specs_dir>/<name>.yaml`, shared by any number of nodes; what differs per node (its name, its
address) comes from the site file, so a spec names only what the nodes using it have in common.

    schema_version: 1
    identity: {hostname: …, domain: lab.internal}      # hostname defaults to the node's name
    network:  {ip: …, gateway: …, dns: [10.11.1.1], search: [lab.internal], routes: [{to: …, via: …}]}
    access:   {posture: prod, users: {ops: {sudo: true, ssh_keys: [alice]}}}   # key names from the secrets file
    platform: {packages: [unbound], services: {enable: [unbound], disable: [systemd-resolved]}}
    config:   {ct: {regenerate_host_keys: true}}        # settings of one node type
    run:      {trigger: interval, interval: 30m}
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from terravixens.config.model import DnsName, InterfaceAddress, PlainAddress, Strict
from terravixens.standalone import vocabulary as words

# The words of a spec live in terravixens/standalone/vocabulary.py, which the node agent reads too; the Literal
# types below repeat three of them for the JSON Schema (tests/test_spec_vocabulary.py pins them to it).


def _matching(pattern: re.Pattern[str], what: str, example: str) -> Callable[[str], str]:
    def check(value: str) -> str:
        if not words.matches(pattern, value):
            raise ValueError(f"{value[:64]!r} is not a valid {what}, e.g. {example!r}")
        return value

    return check


def _username(value: str) -> str:
    problem = words.user_problem(value)
    if problem:
        raise ValueError(problem)
    return value


def _shell(value: str) -> str:
    if not words.matches(words.SHELL, value):
        raise ValueError(f"{value[:64]!r} is not a shell path: give an absolute path, e.g. '/bin/bash'")
    return value


def _duration(value: str) -> str:
    problem = words.interval_problem(value)
    if problem:
        raise ValueError(problem)
    return value


Domain = Annotated[str, AfterValidator(_matching(words.DOMAIN, "DNS domain", "lab.internal"))]
Username = Annotated[str, AfterValidator(_username)]
KeyName = Annotated[
    str, AfterValidator(_matching(words.KEY_NAME, "ssh key name (a key of ssh_keys in the secrets file)", "alice"))
]
Package = Annotated[str, AfterValidator(_matching(words.PACKAGE, "package name", "unbound"))]
Service = Annotated[str, AfterValidator(_matching(words.SERVICE, "systemd unit name", "unbound.service"))]
Group = Annotated[str, AfterValidator(_matching(words.GROUP, "group name", "adm"))]
Shell = Annotated[str, AfterValidator(_shell)]
Duration = Annotated[str, AfterValidator(_duration)]


class Identity(Strict):
    hostname: DnsName | None = Field(None, description="Default: the node's name. Set only in a spec of one node.")
    domain: Domain | None = None


class Route(Strict):
    to: str = Field(description="A network in CIDR notation, e.g. 10.20.0.0/16 (not a default route).")
    via: str = Field(description="The router, on the subnet of one of the node's addresses.")

    @model_validator(mode="after")
    def _a_route(self) -> Route:
        problem = words.route_problem(self.to, self.via)
        if problem:
            raise ValueError(problem)
        return self


class Network(Strict):
    ip: InterfaceAddress | None = Field(None, description="Default: the node's first address in the site file.")
    gateway: PlainAddress | None = Field(None, description="Default: the gateway of that address.")
    dns: list[PlainAddress] = Field(default_factory=list, max_length=words.MAX_DNS)
    search: list[Domain] = Field(default_factory=list, max_length=words.MAX_SEARCH)
    routes: list[Route] = Field(
        default_factory=list,
        max_length=words.MAX_ROUTES,
        description="Static routes, each via a router on one of the node's subnets (vm and ct nodes; ADR 0059).",
    )

    @model_validator(mode="after")
    def _gateway_with_ip(self) -> Network:
        if self.gateway is not None and self.ip is None:
            raise ValueError(
                "gateway is set without ip: set both, or neither to take the node's address and "
                "gateway from the site file"
            )
        return self


class User(Strict):
    sudo: bool = False
    ssh_keys: list[KeyName] = Field(default_factory=list, description="Names of public keys in the secrets file.")
    shell: Shell = "/bin/bash"
    groups: list[Group] = Field(default_factory=list)


class Access(Strict):
    # Required (no default): a spec that forgot its posture must not be served under the open `dev` one, even for a
    # moment; the server refuses to load it (docs/adr/0046-spec-transport-hardening.md).
    posture: DnsName = Field(
        description="Required: a shipped posture (dev, stage, prod, local) or postures/<name>.yaml."
    )
    users: dict[Username, User] = Field(default_factory=dict)


class Services(Strict):
    enable: list[Service] = Field(default_factory=list)
    disable: list[Service] = Field(default_factory=list)

    @model_validator(mode="after")
    def _not_both(self) -> Services:
        both = sorted(set(self.enable) & set(self.disable))
        if both:
            raise ValueError(f"service {both[0]!r} is both enabled and disabled: keep it in one list")
        return self


class Platform(Strict):
    packages: list[Package] = Field(default_factory=list)
    services: Services = Field(default_factory=Services)


class PveConfig(Strict):
    repository: Literal["no-subscription", "enterprise", "none"] = "no-subscription"


class VmConfig(Strict):
    guest_agent: bool = Field(True, description="Install and run qemu-guest-agent (Proxmox reads addresses from it).")


class CtConfig(Strict):
    regenerate_host_keys: bool = Field(
        True, description="Containers from one template share ssh host keys: make new ones on the first run."
    )


class TypeConfig(Strict):
    pve: PveConfig | None = None
    vm: VmConfig | None = None
    ct: CtConfig | None = None

    def types(self) -> list[str]:
        return [name for name in words.NODE_TYPES if getattr(self, name) is not None]


class Run(Strict):
    trigger: Literal["boot", "interval", "manual"] = "interval"
    interval: Duration | None = Field(None, description="With trigger interval: how often to converge (default 30m).")

    @model_validator(mode="after")
    def _interval_with_its_trigger(self) -> Run:
        if self.interval is not None and self.trigger != "interval":
            raise ValueError(
                f"interval {self.interval!r} applies to trigger 'interval' only: remove it or set trigger: interval"
            )
        return self

    @property
    def every(self) -> str | None:
        return (self.interval or words.DEFAULT_INTERVAL) if self.trigger == "interval" else None


class Spec(Strict):
    schema_version: Literal[1]
    description: str = Field("", max_length=500)
    identity: Identity = Field(default_factory=Identity)
    network: Network = Field(default_factory=Network)
    access: Access = Field(description="Required: at least the posture this spec is served under.")
    platform: Platform = Field(default_factory=Platform)
    config: TypeConfig = Field(default_factory=TypeConfig)
    run: Run = Field(default_factory=Run)

    def hostname_for(self, node: str) -> str:
        return self.identity.hostname or node

    def fqdn_for(self, node: str) -> str:
        hostname = self.hostname_for(node)
        return f"{hostname}.{self.identity.domain}" if self.identity.domain else hostname
