"""TV001 OddControlPlaneQuorum: a cluster has 1, 3, 5 or 7 control planes."""
from __future__ import annotations

from constructs import IConstruct

from terravixens.config.model import ALLOWED_CONTROL_PLANE_COUNTS
from terravixens.rules.base import Rule


class OddControlPlaneQuorum(Rule):
    code = "TV001"
    name = "OddControlPlaneQuorum"
    why = ("etcd needs a majority of its members: an even count adds a member without adding fault tolerance, "
           "and more than 7 members slows every write.")

    def visit(self, node: IConstruct) -> None:
        from terravixens.constructs.control_plane import ControlPlane

        if isinstance(node, ControlPlane):
            names = sorted(node.props.control_planes)
            if len(names) not in ALLOWED_CONTROL_PLANE_COUNTS:
                self.fail(node, f"cluster {node.props.cluster_name!r} has {len(names)} control planes "
                                f"({', '.join(names) or 'none'}): use 1, 3, 5 or 7.")
