"""Where operations run: the site synthesized into <root>/cdktf.out/stacks/<layer>/, one Terraform working
directory per layer (the synthesized backends expect exactly that depth: state paths are relative to it).

The `transform` seam rewrites a layer's cdk.tf.json after synth and before Terraform sees it. Operators never set
it; the integration tests use it to run the operations on each stack's projection onto the providers that have a
binary here (tests/terraform.py: talos, helm and kubernetes cannot be built offline, ADR 0003).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from terravixens.config.model import Site
from terravixens.decommission_settings import Decommission
from terravixens.exitcodes import ExitCode
from terravixens.layers import Layer, SiteLayers
from terravixens.operations.outcome import OperationError
from terravixens.synth import rule_messages, synth_failure

Transform = Callable[[str, dict[str, Any]], dict[str, Any]]


@dataclass
class Workspace:
    site: Site
    root: Path = field(default_factory=Path.cwd)
    outdir: Path | None = None
    transform: Transform | None = None
    decommission: Mapping[str, Decommission] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.root = Path(self.root).resolve()
        self.outdir = Path(self.outdir).resolve() if self.outdir else self.root / "cdktf.out"

    @cached_property
    def site_layers(self) -> SiteLayers:
        """Every layer of the site, computed once for the run: the operations read a layer's facts from these."""
        return SiteLayers.of(self.site)

    def layers(self, selection: Sequence[str] | None = None) -> list[Layer]:
        """The layers asked for (by name), in apply order; all of them for None or an empty selection."""
        known = self.site_layers
        if not selection:
            return list(known)
        unknown = [name for name in selection if known.get(name) is None]
        if unknown:
            raise OperationError(
                f"unknown layer {unknown[0]!r}: use one of {', '.join(known.names)}", ExitCode.BAD_INPUT
            )
        return known.select(selection)

    def layer(self, name: str) -> Layer:
        """The layer called `name` (BAD_INPUT naming the site's layers when there is none)."""
        [layer] = self.layers([name])
        return layer

    def platform_layer(self, cluster_name: str) -> Layer:
        """The cluster's platform layer (BAD_INPUT naming the site's clusters for a cluster it has not)."""
        return self.site_layers.platform(self._known_cluster(cluster_name))

    def gitops_layer(self, cluster_name: str) -> Layer:
        return self.site_layers.gitops(self._known_cluster(cluster_name))

    def _known_cluster(self, cluster_name: str) -> str:
        if cluster_name not in self.site.clusters:
            raise OperationError(
                f"unknown cluster {cluster_name!r}: use one of {', '.join(sorted(self.site.clusters))}",
                ExitCode.BAD_INPUT,
            )
        return cluster_name

    @property
    def out(self) -> Path:
        """The cdktf output directory (cdktf.out under the root unless given)."""
        return self.outdir or self.root / "cdktf.out"

    def stack_dir(self, layer: str) -> Path:
        return self.out / "stacks" / layer

    def synth(self) -> list[str]:
        """Synthesizes every layer (full app.synth(): rules, validations, cross-stack wiring). Returns the layers."""
        from terravixens.stacks import build_app

        try:
            build_app(self.site, str(self.outdir), dict(self.decommission), self.site_layers).synth()
        except RuntimeError as error:  # what cdktf raises for error annotations and failed validations
            messages = rule_messages(error)
            if messages is not None:
                raise OperationError("synth stopped by safety rules:\n" + messages, ExitCode.REFUSED) from None
            raise OperationError("synth failed:\n" + synth_failure(error), ExitCode.FAILED) from None
        layers = self.site_layers.names
        if self.transform is not None:
            for layer in layers:
                path = self.stack_dir(layer) / "cdk.tf.json"
                path.write_text(json.dumps(self.transform(layer, json.loads(path.read_text())), indent=2))
        return layers


__all__ = ["Transform", "Workspace"]
