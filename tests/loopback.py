"""Loopback only (127.0.0.0/8) for anything that talks over a network in tests: a free port on a loopback address,
and a check that a document names no other host."""

from __future__ import annotations

import json
import re
import socket

URL = re.compile(r"https?://([^/\"\s:]+)")


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def assert_only_loopback(document: dict) -> None:
    text = json.dumps(document)
    hosts = set(URL.findall(text))
    assert all(host.startswith("127.") for host in hosts), hosts
    addresses = set(re.findall(r"\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}\b", text))
    assert all(address.startswith("127.") for address in addresses), addresses
