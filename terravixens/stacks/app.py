"""The whole app: site file -> model -> constructs -> stacks -> JSON."""
from __future__ import annotations

from cdktf import App

from terravixens.config.model import Site
from terravixens.stacks.gitops import GitopsStack, gitops_stack_name
from terravixens.stacks.hypervisors import NAME as HYPERVISORS, HypervisorsStack
from terravixens.stacks.platform import PlatformStack, platform_stack_name


def stack_names(site: Site) -> list[str]:
    names = [HYPERVISORS]
    for cluster in sorted(site.clusters):
        names += [platform_stack_name(cluster), gitops_stack_name(cluster)]
    return names


def build_app(site: Site, outdir: str | None = None) -> App:
    """An App with every stack of the site. `outdir` None lets the cdktf CLI choose (cdktf.out)."""
    app = App(outdir=outdir) if outdir else App()
    HypervisorsStack(app, site)
    for cluster_name in sorted(site.clusters):
        PlatformStack(app, site, cluster_name)
        GitopsStack(app, site, cluster_name)
    return app
