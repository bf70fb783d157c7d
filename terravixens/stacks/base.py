"""The one base class of every terravixens stack: a layer (terravixens.layers.Layer) of a site, built one way.

Every stack is created the same way, in this order:
    1. its stack-level overrides are recorded from now on (for TV007, terravixens.rules.overrides);
    2. its backend is declared (explicitly, never cdktf's implicit one: terravixens.stacks.backend);
    3. `build()`: the layer's own providers and constructs — the one method a layer kind writes;
    4. `every_stack()`: what every stack gets besides its layer's content;
    5. the safety rules (terravixens.rules.apply_rules), last, so they judge all of the above.

One constructor shape for all: `Stack(scope, site, layer, options)`; the app (terravixens.stacks.app) builds each
layer of `terravixens.layers.site_layers(site)` with its kind's stack class and nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from cdktf import App, TerraformStack
from constructs import Construct

from terravixens.config.model import Site
from terravixens.constructs import python_blocks
from terravixens.decommission_settings import Decommission
from terravixens.layers import Layer
from terravixens.rules import apply_rules, overrides
from terravixens.stacks.backend import declare_backend
from terravixens.stacks.guarded import require_guarded_path


@dataclass(frozen=True)
class BuildOptions:
    """What one build of the app asks of its stacks besides the site. `decommission`: cluster -> how its platform
    stack is synthesized while `terravixens decommission` tears it down (never from the site file)."""

    decommission: Mapping[str, Decommission] = field(default_factory=dict)


class LayerStack(TerraformStack):
    """One layer of a site. Subclasses implement `build()` only; `self.site`, `self.layer` and `self.options` are
    set before it runs."""

    def __init__(self, scope: Construct, site: Site, layer: Layer, options: BuildOptions | None = None):
        super().__init__(scope, layer.name)
        self.site = site
        self.layer = layer
        self.options = options or BuildOptions()
        # Constructs created in it may write their blocks from Python (terravixens.constructs.python_blocks).
        python_blocks.accept(self)
        overrides.record(self)
        declare_backend(self, site.state, site.site, layer.name)
        self.build()
        self.every_stack()
        apply_rules(self)

    def prepare_stack(self) -> None:
        """cdktf's preparing pass (app.synth() calls it first): the blocks written from Python become elements here
        if anything of the synth would need them; they take no part in the pass (same-stack references only)."""
        registry = python_blocks.registry_of(self)
        if registry is None:
            super().prepare_stack()
            return
        registry.before_prepare(App.of(self))
        with registry.quiet():
            super().prepare_stack()

    def build(self) -> None:
        """The layer's providers and constructs."""
        raise NotImplementedError(f"{type(self).__name__} must implement build()")

    @property
    def cluster_name(self) -> str:
        """The cluster of an L1 layer (platform, gitops)."""
        if self.layer.cluster is None:
            raise ValueError(
                f"layer {self.layer.name!r} belongs to no cluster: {type(self).__name__} builds the L1 "
                f"layers of terravixens.layers.site_layers(site)"
            )
        return self.layer.cluster

    def every_stack(self) -> None:
        """Per-stack additions: what every terravixens stack gets whatever its layer, one call per addition, here
        and nowhere else (the backend and the rules, fixed parts of every stack, are in __init__)."""
        require_guarded_path(self)
