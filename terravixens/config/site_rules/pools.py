"""Cilium LoadBalancer pools: clear of every address in use, and not overlapping each other.

Where a clash is reported: a cluster's pool and the cluster layer's addresses (node addresses, endpoint VIPs) are
decided together in `clusters`, so the pool is named and the fix is to shrink it; a standalone node (L2) comes to
the site after the clusters it shares networks with, so its address is named and the fix is to move it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator

from terravixens.config.model import Site
from terravixens.config.site_rules.walk import Finding, dotted, used_addresses


def pools_clear_of_nodes(site: Site) -> Iterator[Finding]:
    used = list(used_addresses(site))
    for cluster_name, cluster in site.clusters.items():
        pools = [(name, ipaddress.ip_network(cidr)) for name, cidrs in cluster.cilium.pools.items() for cidr in cidrs]
        for name, pool in pools:
            where = ("clusters", cluster_name, "cilium", "pools", name)
            for owner, address, machine in used:
                if address not in pool:
                    continue
                if machine is not None and machine.standalone:
                    yield (
                        owner,
                        (
                            f"address {address} is inside LoadBalancer pool {pool} of {dotted(where)}: Cilium "
                            f"would hand it to a Service; move the node or shrink the pool"
                        ),
                    )
                else:
                    yield (
                        where,
                        (
                            f"LoadBalancer pool {pool} contains {address}, used by {dotted(owner)}: "
                            f"Cilium would hand that address to a Service; shrink the pool or move the address"
                        ),
                    )
        for index, (name, pool) in enumerate(pools):
            for other_name, other in pools[index + 1 :]:
                if pool.overlaps(other):
                    yield (
                        ("clusters", cluster_name, "cilium", "pools", name),
                        (f"pool {name} ({pool}) overlaps pool {other_name} ({other}): give each pool its own range"),
                    )
