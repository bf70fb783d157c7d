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
from pathlib import Path
from typing import Any

from terravixens.config.model import Site
from terravixens.decommission_settings import Decommission
from terravixens.exitcodes import ExitCode
from terravixens.layers import gitops_stack_name, platform_stack_name, stack_names
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

    def layers(self, selection: Sequence[str] | None = None) -> list[str]:
        """The layers asked for, in apply order; all of them for None or an empty selection."""
        known = stack_names(self.site)
        if not selection:
            return known
        unknown = [name for name in selection if name not in known]
        if unknown:
            raise OperationError(f"unknown layer {unknown[0]!r}: use one of {', '.join(known)}", ExitCode.BAD_INPUT)
        return [name for name in known if name in selection]

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
            build_app(self.site, str(self.outdir), dict(self.decommission)).synth()
        except RuntimeError as error:  # what cdktf raises for error annotations and failed validations
            messages = rule_messages(error)
            if messages is not None:
                raise OperationError("synth stopped by safety rules:\n" + messages, ExitCode.REFUSED) from None
            raise OperationError("synth failed:\n" + synth_failure(error), ExitCode.FAILED) from None
        layers = stack_names(self.site)
        if self.transform is not None:
            for layer in layers:
                path = self.stack_dir(layer) / "cdk.tf.json"
                path.write_text(json.dumps(self.transform(layer, json.loads(path.read_text())), indent=2))
        return layers

    def cluster_of(self, layer: str) -> str | None:
        for name in self.site.clusters:
            if layer in (platform_stack_name(name), gitops_stack_name(name)):
                return name
        return None

    def platform_layers(self) -> list[str]:
        return [platform_stack_name(name) for name in sorted(self.site.clusters)]


__all__ = ["Transform", "Workspace"]
