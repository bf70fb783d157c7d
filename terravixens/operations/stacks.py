"""`terravixens stacks`: the stacks (layers) a site synthesizes to, in apply order, as a value (StacksReport): the
text renderer prints one name a line (what scripts have always read), `--json` the `terravixens/stacks/v1`
document with each layer's level, kind, cluster and the layer it is applied after."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from terravixens.arguments import Definition, json_option, site_argument
from terravixens.config.model import Site
from terravixens.exitcodes import ExitCode, codes
from terravixens.layers import Layer, site_layers
from terravixens.output import render


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


# ------------------------------------------------------------------------------------------------- command line
def arguments(parser: argparse.ArgumentParser) -> None:
    site_argument(parser)
    json_option(parser, " (terravixens/stacks/v1: each stack's level, kind, cluster and predecessor)")


def command(args: argparse.Namespace, site: Site) -> int:
    return render(stacks(site), args.json)


STACKS = Definition(
    arguments,
    command,
    codes(ExitCode.OK, ExitCode.BAD_INPUT, ExitCode.INTERRUPTED),
    examples=(
        "terravixens stacks --site sites/example.yaml",
        "terravixens stacks --json",
    ),
)


__all__ = ["STACKS", "StacksReport", "arguments", "command", "stacks"]
