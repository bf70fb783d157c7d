"""TV001 OddControlPlaneQuorum: a cluster has 1, 3, 5 or 7 control planes."""

from __future__ import annotations

from terravixens.config.model import ALLOWED_CONTROL_PLANE_COUNTS
from terravixens.rules.base import Rule
from terravixens.rules.view import StackView


class OddControlPlaneQuorum(Rule):
    code = "TV001"
    name = "OddControlPlaneQuorum"
    why = (
        "etcd needs a majority of its members: an even count adds a member without adding fault tolerance, "
        "and more than 7 members slows every write."
    )

    def check(self, view: StackView) -> None:
        from terravixens.constructs.control_plane import ControlPlane

        for control_plane in view.of_class(ControlPlane):
            names = sorted(control_plane.props.control_planes)
            if len(names) not in ALLOWED_CONTROL_PLANE_COUNTS:
                self.fail(
                    control_plane,
                    f"cluster {control_plane.props.cluster_name!r} has {len(names)} control "
                    f"planes ({', '.join(names) or 'none'}): use 1, 3, 5 or 7.",
                )
