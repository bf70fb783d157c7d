"""Site file -> typed model. Nothing here knows about cdktf."""

from terravixens.config.addressing import first_contact_address, node_address
from terravixens.config.loader import SiteError, SiteProblem, load_site, parse_site
from terravixens.config.model import Cluster, Hypervisor, Node, Site
from terravixens.config.placement import PlacedNode, place, placed_nodes

__all__ = [
    "Cluster",
    "Hypervisor",
    "Node",
    "PlacedNode",
    "Site",
    "SiteError",
    "SiteProblem",
    "first_contact_address",
    "load_site",
    "node_address",
    "parse_site",
    "place",
    "placed_nodes",
]
