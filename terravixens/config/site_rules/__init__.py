"""Rules that need the whole site: references between sections, uniqueness, subnets, pools, labels and taints, the
control planes' spread over the hypervisors.

The loader runs them once the model is valid (terravixens.config.loader.parse_site): each rule is a function of
the valid `Site` that yields (field path, message) findings, so the loader can name the exact field and line, and
all problems are reported at once. A finding that is a `Caution` warns instead of refusing (`cautions`). No rule
raises, none imports the loader: data flows one way.

A new section of the site brings its rules as a module here and adds them to `RULES`: that is the one place.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from terravixens.config.model import Site
from terravixens.config.site_rules import (
    charts,
    failure_domains,
    labels,
    pools,
    references,
    standalone,
    storage,
    subnets,
    uniqueness,
)
from terravixens.config.site_rules.walk import Caution, Finding

SiteRule = Callable[[Site], Iterable[Finding]]

RULES: tuple[SiteRule, ...] = (
    references.known_hypervisors,
    references.bridges_exist,
    references.vlans_allowed_on_bridges,
    uniqueness.unique_vm_ids,
    uniqueness.unique_hostnames,
    uniqueness.unique_vm_names,
    uniqueness.unique_mac_addresses,
    subnets.nodes_reachable,
    subnets.gateways_reachable,
    subnets.vlan_subnets,
    subnets.management_vlan_present,
    subnets.vip_in_management_subnet,
    uniqueness.unique_addresses,
    pools.pools_clear_of_nodes,
    charts.chart_archives,
    labels.label_syntax,
    labels.labels_a_worker_may_set,
    labels.taint_syntax,
    standalone.fields_of_their_type,
    standalone.names_distinct_from_hypervisors,
    standalone.known_parents,
    standalone.parents_host_guests,
    standalone.no_parent_cycles,
    standalone.complete_presets,
    standalone.known_presets,
    standalone.spec_server_given,
    storage.unique_storage_ids,
    storage.node_storage_exists,
    failure_domains.control_planes_spread,
)


def check(site: Site, rules: Iterable[SiteRule] = RULES) -> list[Finding]:
    """Every finding of every rule that refuses the site, in rule order (a `Caution` does not: see `cautions`)."""
    return [finding for rule in rules for finding in rule(site) if not isinstance(finding, Caution)]


def cautions(site: Site, rules: Iterable[SiteRule] = RULES) -> list[Caution]:
    """Every warning of every rule, in rule order, for a site that loaded: the one place they are read
    (terravixens.config.loader.warnings, which `validate` and `show` print)."""
    return [finding for rule in rules for finding in rule(site) if isinstance(finding, Caution)]


__all__ = ["RULES", "Caution", "Finding", "SiteRule", "cautions", "check"]
