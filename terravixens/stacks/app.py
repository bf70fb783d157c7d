"""The whole app: site file -> model -> constructs -> stacks -> JSON."""
from __future__ import annotations

from collections.abc import Mapping

from cdktf import App

from terravixens.config.model import Site
from terravixens.layers import stack_names
from terravixens.stacks.gitops import GitopsStack
from terravixens.stacks.hypervisors import HypervisorsStack
from terravixens.decommission_settings import Decommission
from terravixens.stacks.platform import PlatformStack
from terravixens.stacks.standalone import StandaloneStack
from terravixens.standalone.layout import standalone_layers

__all__ = ["build_app", "stack_names"]


def build_app(site: Site, outdir: str | None = None, decommission: Mapping[str, Decommission] | None = None) -> App:
    """An App with every stack of the site. `outdir` None lets the cdktf CLI choose (cdktf.out).

    Layers depend on each other in apply order (hypervisors -> platform-<cluster> -> gitops-<cluster>; hypervisors
    -> standalone -> standalone-<nested host> -> its nested hosts' stacks), recorded in the manifest, so `cdktf deploy '*'` applies them in that order and destroys them in the reverse one.
    `decommission` (cluster -> settings) is for `terravixens decommission` only.
    """
    app = App(outdir=outdir) if outdir else App()
    hypervisors = HypervisorsStack(app, site)
    for cluster_name in sorted(site.clusters):
        platform = PlatformStack(app, site, cluster_name, (decommission or {}).get(cluster_name))
        platform.add_dependency(hypervisors)
        gitops = GitopsStack(app, site, cluster_name)
        gitops.add_dependency(platform)
    l2: dict[str, StandaloneStack] = {}
    for name, layer in standalone_layers(site).items():
        l2[name] = StandaloneStack(app, site, layer)
        l2[name].add_dependency(hypervisors if layer.after is None else l2[layer.after])
    return app
