"""Storage (L0, ADR 0044): each storage id once in the site, and every storage a node names exists on its hypervisor
with the content that node's disk needs.

A node's storage is a storage its hypervisor declares under `storage`, or the hypervisor's `datastores.vm` (a
storage that exists outside the site, like `local-lvm`). Removing a storage from the site while a node still names
it is reported here, at the node: the hypervisors layer would otherwise delete a definition the node's disk lives on
(the plan guard's PG010 judges the same on what is deployed).
"""

from __future__ import annotations

from collections.abc import Iterator

from terravixens.config.model import Hypervisor, Site
from terravixens.config.site_rules.walk import Finding, Path, all_nodes, standalone_nodes
from terravixens.config.storage import CONTAINER_DISKS, VM_DISKS, PbsDatastore, contents, password_variable
from terravixens.inputs import shown


def unique_storage_ids(site: Site) -> Iterator[Finding]:
    """Storage ids are Proxmox-cluster-wide (one storage.cfg): the site's hypervisors share one, so each id once.
    Two ids that make one Terraform name (`a.b`, `a_b`: logical id, password variable) are refused too."""
    seen: dict[str, str] = {}
    variables: dict[str, str] = {}
    for hv_name, hypervisor in site.hypervisors.items():
        for storage_id in hypervisor.storage:
            path = ("hypervisors", hv_name, "storage", storage_id)
            if storage_id in seen:
                yield (
                    path,
                    (
                        f"storage {shown(storage_id)} is declared on hypervisors {seen[storage_id]} and {hv_name}: "
                        f"Proxmox storage ids are cluster-wide; give this one another id"
                    ),
                )
                continue
            seen[storage_id] = hv_name
            variable = password_variable(storage_id)
            if variable in variables:
                yield (
                    path,
                    (
                        f"storage {shown(storage_id)} and {shown(variables[variable])} would share Terraform names "
                        f"(logical id, password variable {variable}): '.', '-' and '_' are one there; rename one"
                    ),
                )
            variables[variable] = storage_id


def _known(hypervisor: Hypervisor) -> str:
    return ", ".join(sorted({*hypervisor.storage, hypervisor.datastores.vm}))


def _missing(path: Path, wanted: str, hv_name: str, hypervisor: Hypervisor, needs: str) -> Iterator[Finding]:
    if wanted == hypervisor.datastores.vm:
        return
    declared = hypervisor.storage.get(wanted)
    if declared is None:
        yield (
            (*path, "storage"),
            (
                f"storage {shown(wanted)} does not exist on hypervisor {hv_name}: declare it under "
                f"hypervisors.{hv_name}.storage, or use one of {_known(hypervisor)}"
            ),
        )
    elif needs not in contents(declared):
        fix = (
            "a Proxmox Backup Server datastore holds backups only: use another storage"
            if isinstance(declared, PbsDatastore)
            else f"add {needs} to hypervisors.{hv_name}.storage.{wanted}.content, or use another storage"
        )
        yield (
            (*path, "storage"),
            (
                f"storage {shown(wanted)} of hypervisor {hv_name} does not hold {needs} (its content: "
                f"{', '.join(sorted(contents(declared)))}): {fix}"
            ),
        )


def node_storage_exists(site: Site) -> Iterator[Finding]:
    """A cluster node's disk (`images`) and a standalone guest's root disk (`images` for vm/pve, `rootdir` for ct)
    are on a storage of their hypervisor. A nested host's storage is not in the site: its guests cannot name one."""
    for at in all_nodes(site):
        hypervisor = site.hypervisors.get(at.node.hypervisor)
        if at.node.storage is None or hypervisor is None:  # an unknown hypervisor is reported by known_hypervisors
            continue
        yield from _missing(at.path, at.node.storage, at.node.hypervisor, hypervisor, VM_DISKS)
    for guest in standalone_nodes(site):
        wanted = guest.node.storage
        if wanted is None:
            continue
        hypervisor = site.hypervisors.get(guest.node.parent)
        if hypervisor is None:
            if guest.node.parent in site.standalone.nodes:
                yield (
                    (*guest.path, "storage"),
                    (
                        f"storage {shown(wanted)} is named for a guest of nested host {guest.node.parent}, whose "
                        f"storage the site does not declare: remove storage (the guest uses the nested host's "
                        f"local-lvm)"
                    ),
                )
            continue
        needs = CONTAINER_DISKS if guest.node.type == "ct" else VM_DISKS
        yield from _missing(guest.path, wanted, guest.node.parent, hypervisor, needs)
