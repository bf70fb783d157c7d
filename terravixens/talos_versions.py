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
