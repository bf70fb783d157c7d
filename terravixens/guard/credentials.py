"""What a credentials renewal may change in a platform layer's plan, attribute by attribute (`terravixens
renew-credentials`, ADR 0056): the admin kubeconfig (`talos_cluster_kubeconfig`, replaced: a new client certificate),
the talosconfig's client configuration (`client_configuration` of `talos_machine_secrets`: the talos provider issues
a new client certificate from the secrets' OS CA in the certificate's last month; the machine secrets themselves
never change) and, when that happens, the copy of that client configuration each node's configuration apply keeps to
reset its node when it leaves (`client_configuration` of `talos_machine_configuration_apply`: its machine
configuration, patches, node, endpoint, modes unchanged — the node is sent the configuration it runs).

Anything else in the plan — a node's configuration, a VM, the membership record, a secret — is not a renewal: the
renewal is refused, nothing applied, and the other change is deployed first with `terravixens deploy`.
"""

from __future__ import annotations

from typing import Any

from terravixens.catalogue import MACHINE_SECRETS, NODE_APPLY
from terravixens.guard.plan import Plan

KUBECONFIG = "talos_cluster_kubeconfig"
CLIENT_CONFIGURATION = "client_configuration"
# type -> the attributes a renewal may change (None: the resource itself is the credential, replaced whole)
RENEWABLE: dict[str, frozenset[str] | None] = {
    KUBECONFIG: None,
    MACHINE_SECRETS: frozenset({CLIENT_CONFIGURATION}),
    NODE_APPLY: frozenset({CLIENT_CONFIGURATION}),
}


def _unknown(value: Any) -> bool:
    """after_unknown's marker for an attribute: True, or a structure holding a True."""
    if isinstance(value, dict):
        return any(_unknown(item) for item in value.values())
    if isinstance(value, list):
        return any(_unknown(item) for item in value)
    return value is True


def changed_attributes(before: dict[str, Any], after: dict[str, Any], after_unknown: dict[str, Any]) -> set[str]:
    """The top-level attributes an update changes: a value that differs, or one known only after apply."""
    keys = set(before) | set(after) | set(after_unknown)
    return {key for key in keys if _unknown(after_unknown.get(key)) or before.get(key) != after.get(key)}


def beyond_credentials(plan: Plan) -> list[str]:
    """Each change of `plan` that is not a credential's, with what it changes (empty: a renewal and nothing else)."""
    found = []
    for change in plan.changes:
        if change.actions == ("no-op",):
            continue
        allowed = RENEWABLE.get(change.type, frozenset())
        if change.type == KUBECONFIG and (change.replaced or change.updates or change.actions == ("create",)):
            continue
        if allowed and change.actions == ("update",):
            extra = changed_attributes(change.before, change.after, change.after_unknown) - allowed
            if not extra:
                continue
            found.append(f"{change.address}: update of {', '.join(sorted(extra))}")
            continue
        found.append(f"{change.address}: {'/'.join(change.actions)}")
    return found


def renewed(plan: Plan) -> dict[str, list[str]]:
    """What the plan renews: the kubeconfig (replaced), the talosconfig's client certificate (the secrets' client
    configuration), and the node applies that take it."""
    found: dict[str, list[str]] = {"kubeconfig": [], "talosconfig": [], "applies": []}
    for change in plan.changes:
        if change.type == KUBECONFIG and change.actions != ("no-op",):
            found["kubeconfig"].append(change.address)
        elif change.type == MACHINE_SECRETS and change.actions == ("update",):
            found["talosconfig"].append(change.address)
        elif change.type == NODE_APPLY and change.actions == ("update",):
            found["applies"].append(change.address)
    return found


__all__ = ["CLIENT_CONFIGURATION", "KUBECONFIG", "RENEWABLE", "beyond_credentials", "changed_attributes", "renewed"]
