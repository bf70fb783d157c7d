"""The Talos versions terravixens supports, the Kubernetes versions each of them runs, and configuration contracts.

The Kubernetes ranges are Talos' own table, `pkg/machinery/compatibility/talos111`, `talos112`, `talos113` of
siderolabs/talos (MinimumKubernetesVersion 1.NN.0, MaximumKubernetesVersion 1.NN.99: every patch of the last
minor): what a node enforces when it applies a configuration and what `talosctl upgrade-k8s` checks. The validator
built from each minor's machinery answers the same question (`talos-validate -kubernetes`), and
tests/test_talos_validate.py holds this table to its answers (docs/adr/0023).

A configuration contract (`v1.11`) is the Talos minor a machine configuration is generated for: the provider's
`talos_version` on `talos_machine_configuration`. It is not the version the nodes run (docs/adr/0023).

A table of facts below the site model: the model's fields validate versions against it (terravixens.config.fields),
and the Talos patches read it (terravixens.talos.patches); it imports nothing of terravixens.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

Minor = tuple[int, int]

# Talos minor -> (oldest, newest) Kubernetes minor it runs.
KUBERNETES: dict[Minor, tuple[Minor, Minor]] = {
    (1, 11): ((1, 29), (1, 34)),
    (1, 12): ((1, 30), (1, 35)),
    (1, 13): ((1, 31), (1, 36)),
}
OLDEST_SUPPORTED_TALOS: Minor = min(KUBERNETES)
NEWEST_SUPPORTED_TALOS: Minor = max(KUBERNETES)
# From this contract on, Talos generates a HostnameConfig document: the hostname moves there (docs/adr/0023).
HOSTNAME_CONFIG_CONTRACT: Minor = (1, 12)

MINOR = re.compile(r"^v?(\d+)\.(\d+)(?:\.\d+)?(?:-[0-9A-Za-z.-]+)?$")


def minor_of(version: str) -> Minor:
    """(1, 12) for v1.12.7, 1.12, v1.12.0-beta.1."""
    found = MINOR.match(version)
    if found is None:
        raise ValueError(f"{version!r} is not a version like v1.12.7 or v1.12")
    return int(found.group(1)), int(found.group(2))


def text(minor: Minor) -> str:
    return f"v{minor[0]}.{minor[1]}"


def supported_range() -> str:
    return f"{text(OLDEST_SUPPORTED_TALOS)}.x to {text(NEWEST_SUPPORTED_TALOS)}.x"


def kubernetes_range(talos: Minor) -> tuple[Minor, Minor]:
    return KUBERNETES[talos]


def kubernetes_supported(talos: Minor, kubernetes: Minor) -> bool:
    oldest, newest = KUBERNETES[talos]
    return oldest <= kubernetes <= newest


def writes_hostname_config(contract: Minor) -> bool:
    return contract >= HOSTNAME_CONFIG_CONTRACT


# ------------------------------------------------------------------------------------------ a running release
# What `talosctl version` prints for a node (upgrade decides with it, drift compares it with the site).
IDENTIFIER = r"[0-9A-Za-z-]+"
DOTTED = rf"{IDENTIFIER}(?:\.{IDENTIFIER})*"
RELEASE = re.compile(rf"^v?(\d+)\.(\d+)\.(\d+)(?:-({DOTTED}))?(?:\+({DOTTED}))?$")
NO_PATCH = re.compile(r"^v?\d+\.\d+$")


@dataclass(frozen=True)
class TalosVersion:
    """A Talos release as talosctl prints it, ordered as semantic versions: pre-releases before the release
    (v1.12.0-beta.1 < v1.12.0), their dot-separated parts numerically where numeric (beta.2 < beta.10); build
    metadata (`+custom`) does not order, but a build is not the release it is built from (see `same`)."""

    text: str
    major: int
    minor: int
    patch: int
    pre: tuple[str, ...] = ()
    build: str = ""

    @property
    def key(self) -> tuple[Any, ...]:
        pre = tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in self.pre)
        return self.major, self.minor, self.patch, (0, pre) if self.pre else (1, ())

    def same(self, other: TalosVersion) -> bool:
        """The same release and build (`1.11.6` is `v1.11.6`; `v1.11.6+custom` is not)."""
        return self.key == other.key and self.build == other.build

    def __str__(self) -> str:
        return self.text


def parse_version(text: str) -> TalosVersion | str:
    """The version, or why it is not one (a value: the caller stops naming the node)."""
    found = RELEASE.match(text.strip())
    if found:
        major, minor, patch, pre, build = found.groups()
        return TalosVersion(
            text.strip(), int(major), int(minor), int(patch), tuple(pre.split(".")) if pre else (), build or ""
        )
    if NO_PATCH.match(text.strip()):
        return f"{text.strip()!r} has no patch number: it cannot be compared with a release like v1.11.6"
    shown = text.strip()[:60] or "nothing"
    return f"{shown!r} is not a Talos version like v1.11.6"
