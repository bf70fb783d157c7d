"""`terravixens validate`: a site file and, when it has standalone nodes, their specs; one summary line when ok."""

from __future__ import annotations

from typing import TextIO

from terravixens.config.model import Site
from terravixens.exitcodes import ExitCode


def validate(site: Site, site_path: str | None, out: TextIO, err: TextIO) -> int:
    """OK and a summary on `out` when the site (already loaded and checked) and its standalone specs are sound;
    BAD_INPUT and every spec problem on `err` otherwise."""
    nodes = sum(len(cluster.nodes()) for cluster in site.clusters.values())
    standalone = ""
    if site.standalone.nodes:
        from terravixens.standalone.validate import validate_site_specs

        problems = validate_site_specs(site_path)
        if problems:
            print(problems, file=err)
            return ExitCode.BAD_INPUT
        standalone = f", {len(site.standalone.nodes)} standalone nodes"
    print(
        f"{site_path or 'site'}: ok — site {site.site!r}, {len(site.hypervisors)} hypervisors, "
        f"{len(site.clusters)} clusters, {nodes} nodes{standalone}",
        file=out,
    )
    return ExitCode.OK
