"""Where a helm_release finds a third-party chart (ADR 0043): a chart repository, an OCI registry, or an archive.

Repository and OCI charts are fetched by the helm provider at plan time (it reads the repository index, or the
registry's manifest); an archive is copied next to the stack at synth as a cdktf asset (the JSON holds a relative
path) and read from there, so a site whose charts are all archives has no chart URL in its gitops layer.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

from cdktf import AssetType, TerraformAsset
from constructs import Construct

from terravixens.config.model import ChartSource


class ChartArguments(TypedDict):
    chart: str
    version: str
    repository: NotRequired[str]


def chart_arguments(
    scope: Construct, chart: str, version: str, source: ChartSource | None, default_repository: str
) -> ChartArguments:
    """The helm_release arguments `repository`, `chart` and `version` for one chart."""
    pinned = version.removeprefix("v")
    if source is None:
        return {"repository": default_repository, "chart": chart, "version": pinned}
    if source.archive is not None:
        # The site rule (config/site_rules/charts.py) checked its digest and its Chart.yaml (name, version).
        asset = TerraformAsset(scope, f"{chart}_archive", path=source.archive, type=AssetType.FILE)
        return {"chart": asset.path, "version": pinned}
    # The model holds exactly one source: no archive, so an OCI path or a repository.
    repository = source.oci or source.repository or default_repository
    return {"repository": repository, "chart": chart, "version": pinned}
