"""`terravixens stacks`: the stacks (layers) a site synthesizes to, in apply order, as a value (StacksReport): the
text renderer prints one name a line (what scripts have always read), `--json` the `terravixens/stacks/v1`
document with each layer's level, kind, cluster and the layer it is applied after."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from terravixens.config.model import Site
from terravixens.exitcodes import ExitCode
from terravixens.layers import Layer, site_layers


@dataclass(frozen=True)
class StacksReport:
    site: str
    layers: tuple[Layer, ...]
    command: str = "stacks"
    exit_code: int = ExitCode.OK

    def lines(self) -> list[str]:
        return [layer.name for layer in self.layers]

    def notes(self) -> list[str]:
        return []

    def body(self) -> Mapping[str, Any]:
        return {
            "site": self.site,
            "stacks": [
                {
                    "name": layer.name,
                    "level": layer.kind.level,
                    "kind": layer.kind.name,
                    "cluster": layer.cluster,
                    "after": layer.after,
                }
                for layer in self.layers
            ],
        }


def stacks(site: Site) -> StacksReport:
    return StacksReport(site.site, tuple(site_layers(site)))


__all__ = ["StacksReport", "stacks"]
