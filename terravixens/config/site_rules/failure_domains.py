"""Hypervisors as failure domains (ADR 0054): a hypervisor that holds a majority of a cluster's control planes takes
etcd's quorum down with it — a kernel update, a disk, a power supply — and the cluster's API with it.

- Refused (an error naming the control plane to move and where) when the site has enough hypervisors for none of them
  to hold a majority: `n` control planes fit `n // 2` to a host, so they need `ceil(n / (n // 2))` hypervisors —
  3 for 3, 5 or 7 control planes.
- A warning (`Caution`: the site loads; `validate` and `show` print it) when the site has fewer hypervisors than
  that: whatever the user does, one host holds a majority, and the fix is another host, not another edit.
- Accepted without a word when the cluster's `placement.allow_control_plane_majority_on` names that hypervisor,
  with a reason; such an exemption is refused when it accepts nothing (no majority there, or one control plane).
- A cluster of one control plane is outside the rule: one is always a majority of one, no placement changes what
  losing its host does, and choosing one control plane (TV001 allows it) is choosing no etcd fault tolerance.
"""

from __future__ import annotations

from collections.abc import Iterator

from terravixens.config.model import Cluster, Site
from terravixens.config.site_rules.walk import Caution, Finding
from terravixens.inputs import shown


def majority(count: int) -> int:
    """How many etcd members a cluster of `count` needs to keep its quorum."""
    return count // 2 + 1


def hypervisors_needed(count: int) -> int | None:
    """How many hypervisors `count` control planes need for none to hold a majority (each holds at most `count //
    2`); None for one control plane, which is a majority of itself wherever it runs."""
    most = count // 2
    return None if most == 0 else -(-count // most)


def _exemption_path(cluster_name: str) -> tuple[str, ...]:
    return ("clusters", cluster_name, "placement", "allow_control_plane_majority_on")


def _leaving(cluster: Cluster, on_host: list[str], excess: int) -> list[str]:
    """The control planes to move off a host holding `excess` too many: the last ones by name, the bootstrap node
    (the first by default) only when no other will do (it bootstraps once: moving it later changes nothing)."""
    order = [name for name in reversed(on_host) if name != cluster.bootstrap]
    order += [name for name in on_host if name == cluster.bootstrap]
    return sorted(order[:excess])


def moves_off(site: Site, cluster: Cluster, host: str, count: int, most: int | None = None) -> list[tuple[str, str]]:
    """`count` control planes to move off `host`, and where: the last ones by name (the bootstrap node, first by
    default, stays), each to the hypervisor holding the fewest of the cluster's control planes (one that declares the
    node's bridge first, then by name), never one that would then hold more than `most`. Fewer moves when no
    hypervisor can take one (a site of one hypervisor). Also what `terravixens maintain` says to move first."""
    load = dict.fromkeys(site.hypervisors, 0)
    for node in cluster.control_planes.values():
        if node.hypervisor in load:
            load[node.hypervisor] += 1
    on_host = sorted(name for name, node in cluster.control_planes.items() if node.hypervisor == host)
    moves = []
    for name in _leaving(cluster, on_host, count):
        bridge = cluster.control_planes[name].bridge or cluster.bridge

        def order(candidate: str, bridge: str = bridge) -> tuple[bool, int, str]:
            bridges = site.hypervisors[candidate].bridges
            return (bool(bridges) and bridge not in bridges, load[candidate], candidate)

        candidates = [h for h in site.hypervisors if h != host and (most is None or load[h] < most)]
        if not candidates:
            break
        target = min(candidates, key=order)
        load[target] += 1
        load[host] -= 1
        moves.append((name, target))
    return moves


def control_planes_spread(site: Site) -> Iterator[Finding]:
    """Per cluster, no hypervisor holds a majority of its control planes when the site's hypervisors allow it."""
    for cluster_name, cluster in sorted(site.clusters.items()):
        placed = {
            name: node.hypervisor
            for name, node in sorted(cluster.control_planes.items())
            if node.hypervisor in site.hypervisors  # an unknown one is references.known_hypervisors' finding
        }
        count = len(cluster.control_planes)
        exemption = cluster.placement.allow_control_plane_majority_on if cluster.placement else None
        if exemption is not None and exemption not in site.hypervisors:
            yield (
                _exemption_path(cluster_name),
                f"unknown hypervisor {shown(exemption)}: use one of {', '.join(sorted(site.hypervisors))}",
            )
            exemption = None
        needed = hypervisors_needed(count)
        if needed is None:
            if exemption is not None:
                yield (
                    _exemption_path(cluster_name),
                    (
                        f"cluster {cluster_name} has one control plane: no placement spreads one (losing its "
                        f"hypervisor stops the cluster's API wherever it runs), so there is nothing to accept; remove "
                        f"placement"
                    ),
                )
            continue
        holding = {host: sorted(n for n, h in placed.items() if h == host) for host in sorted(set(placed.values()))}
        host = next((h for h, names in holding.items() if len(names) >= majority(count)), None)
        if exemption is not None and exemption != host:
            held = len(holding.get(exemption, []))
            elsewhere = f" (it is {host} that holds a majority)" if host else ""
            yield (
                _exemption_path(cluster_name),
                (
                    f"{exemption} holds {held} of cluster {cluster_name}'s {count} control planes, no majority: "
                    f"there is nothing to accept there, and kept, it would accept a majority moved there later "
                    f"without a word; remove placement{elsewhere}"
                ),
            )
        if host is None or host == exemption:
            continue
        names = holding[host]
        listed = ", ".join(names) if len(", ".join(names)) <= 60 else ", ".join(names[:2]) + ", …"
        head = (
            f"{host} holds {len(names)} of {cluster_name}'s {count} control planes ({listed}): losing "
            f"{host} loses etcd's quorum and the API"
        )
        accept = f"clusters.{cluster_name}.placement: {{allow_control_plane_majority_on: {host}, reason: …}}"
        if len(site.hypervisors) >= needed:
            moves = moves_off(site, cluster, host, len(names) - count // 2, most=count // 2)
            fix = " and ".join(f"{name} to {target}" for name, target in moves)
            message = (
                f"{head}, and the site's {len(site.hypervisors)} hypervisors can avoid it: move {fix}, or accept it "
                f"knowingly with {accept}"
            )
            yield ("clusters", cluster_name, "control_planes", moves[0][0], "hypervisor"), message
        else:
            moved = _leaving(cluster, names, len(names) - count // 2)
            plural = "s" if len(site.hypervisors) != 1 else ""
            yield Caution(
                ("clusters", cluster_name, "control_planes"),
                f"{head}; the site's {len(site.hypervisors)} hypervisor{plural} cannot avoid it ({count} control "
                f"planes need {needed}): add hypervisors and move {' and '.join(moved)} off {host}, or acknowledge "
                f"it with {accept}",
            )


__all__ = ["control_planes_spread", "hypervisors_needed", "majority", "moves_off"]
