"""The whole app: site file -> model -> constructs -> stacks -> JSON."""
from __future__ import annotations

from cdktf import App

from terravixens.config.model import Site
from terravixens.layers import stack_names
from terravixens.stacks.gitops import GitopsStack
from terravixens.stacks.hypervisors import HypervisorsStack
from terravixens.stacks.platform import PlatformStack

__all__ = ["build_app", "stack_names"]


def build_app(site: Site, outdir: str | None = None) -> App:
    """An App with every stack of the site. `outdir` None lets the cdktf CLI choose (cdktf.out)."""
    app = App(outdir=outdir) if outdir else App()
    HypervisorsStack(app, site)
    for cluster_name in sorted(site.clusters):
        PlatformStack(app, site, cluster_name)
        GitopsStack(app, site, cluster_name)
    return app
