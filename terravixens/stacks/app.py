"""The whole app: site file -> model -> constructs -> stacks -> JSON."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from cdktf import App

from terravixens.config.model import Site
from terravixens.decommission_settings import Decommission
from terravixens.layers import Layer, site_layers, stack_names
from terravixens.stacks.base import BuildOptions, LayerStack

__all__ = ["build_app", "stack_names"]


def build_app(
    site: Site,
    outdir: str | None = None,
    decommission: Mapping[str, Decommission] | None = None,
    layers: Iterable[Layer] | None = None,
) -> App:
    """An App with every stack of the site. `outdir` None lets the cdktf CLI choose (cdktf.out).

    One stack per layer of `terravixens.layers.site_layers(site)`, built by its kind's stack class, each depending
    on the layer it comes after (hypervisors -> platform-<cluster> -> gitops-<cluster>; hypervisors -> standalone ->
    standalone-<nested host> -> its nested hosts' stacks), recorded in the manifest, so `cdktf deploy '*'` applies
    them in that order and destroys them in the reverse one.
    `decommission` (cluster -> settings) is for `terravixens decommission` only; `layers`: the site's layers when
    the caller has them already (an operation's Workspace), else computed here.
    """
    app = App(outdir=outdir) if outdir else App()
    options = BuildOptions(decommission=dict(decommission or {}))
    stacks: dict[str, LayerStack] = {}
    for layer in site_layers(site) if layers is None else layers:
        stack = layer.kind.stack_class()(app, site, layer, options)
        if layer.after is not None:
            stack.add_dependency(stacks[layer.after])
        stacks[layer.name] = stack
    return app
