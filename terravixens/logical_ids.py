"""Logical ids are public API: they are Terraform addresses, and a changed address is a destroy plus a create.

Every resource terravixens emits gets an explicit logical id built here (pure: no cdktf import, so the plan
guard can use it without starting jsii) from stable names (site keys), never from
a list position, a role or cdktf's path hash. See docs/adr/0006-logical-ids.md.

- node-owned:       node_<node>_<part>            e.g. node_cp-a_vm, node_cp-a_apply
- cluster-level:    cluster_<part>                e.g. cluster_secrets, cluster_bootstrap
- hypervisor-owned: hv_<hypervisor>_<part>        e.g. hv_pve1_bridge_vmbr1, hv_pve1_image_v1-11-5_ce4c980550dd
- standalone-owned: sa_<node>_<part>              e.g. sa_dns1_ct, sa_jump1_vm, sa_jump1_node_env (L2, ADR 0025)
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:  # pure module: the plan guard uses it without starting jsii
    from cdktf import TerraformElement

T = TypeVar("T", bound="TerraformElement")

NODE_PREFIX = "node_"
CLUSTER_PREFIX = "cluster_"
HYPERVISOR_PREFIX = "hv_"
STANDALONE_PREFIX = "sa_"


def _clean(part: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "-", part)


def node_id(node: str, part: str) -> str:
    return f"{NODE_PREFIX}{node}_{part}"


def cluster_id(part: str) -> str:
    return f"{CLUSTER_PREFIX}{part}"


def hypervisor_id(hypervisor: str, *parts: str) -> str:
    return "_".join([f"{HYPERVISOR_PREFIX}{hypervisor}", *(_clean(part) for part in parts)])


def standalone_id(node: str, part: str) -> str:
    return f"{STANDALONE_PREFIX}{node}_{part}"


def standalone_owner_of(logical_id: str) -> str | None:
    """The standalone node that owns a logical id (`sa_<node>_<part>`), else None."""
    if not logical_id.startswith(STANDALONE_PREFIX):
        return None
    return logical_id[len(STANDALONE_PREFIX) :].split("_", 1)[0]


def owner_of(logical_id: str) -> str | None:
    """The node that owns a logical id, or None for cluster- and hypervisor-level ids."""
    if not logical_id.startswith(NODE_PREFIX):
        return None
    # Node names are DNS labels (no '_'), so the node name ends at the first '_'.
    return logical_id[len(NODE_PREFIX) :].split("_", 1)[0]


def pin(element: T, logical_id: str) -> T:
    element.override_logical_id(logical_id)
    return element
