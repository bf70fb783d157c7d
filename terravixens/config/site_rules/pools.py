"""Cilium LoadBalancer pools: clear of every address in use, and not overlapping each other."""
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
            for owner, address in used:
                if address in pool:
                    yield ("clusters", cluster_name, "cilium", "pools", name), (
                        f"LoadBalancer pool {pool} contains {address}, used by {dotted(owner)}: "
                        f"Cilium would hand that address to a Service; shrink the pool or move the address"
                    )
        for index, (name, pool) in enumerate(pools):
            for other_name, other in pools[index + 1:]:
                if pool.overlaps(other):
                    yield ("clusters", cluster_name, "cilium", "pools", name), (
                        f"pool {name} ({pool}) overlaps pool {other_name} ({other}): give each pool its own range"
                    )
