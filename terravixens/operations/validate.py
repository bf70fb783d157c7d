"""`terravixens validate`: a site file and, when it has standalone nodes, their specs; one summary line when ok."""
from __future__ import annotations

from typing import TextIO

from terravixens.config.model import Site


def validate(site: Site, site_path: str | None, out: TextIO, err: TextIO) -> int:
    """0 and a summary on `out` when the site (already loaded and checked) and its standalone specs are sound;
    2 and every spec problem on `err` otherwise."""
    nodes = sum(len(cluster.nodes()) for cluster in site.clusters.values())
    standalone = ""
    if site.standalone.nodes:
        from terravixens.standalone.validate import validate_site_specs

        problems = validate_site_specs(site_path)
        if problems:
            print(problems, file=err)
            return 2
        standalone = f", {len(site.standalone.nodes)} standalone nodes"
    print(f"{site_path or 'site'}: ok — site {site.site!r}, {len(site.hypervisors)} hypervisors, "
          f"{len(site.clusters)} clusters, {nodes} nodes{standalone}", file=out)
    return 0
