"""`terravixens spec validate`: a spec file, a specs folder, or a site's whole standalone setup.

spec validate PATH                      a spec file (with the postures of its folder) or a specs folder;
                                        a site file (top-level `site:`) is taken as --site PATH
spec validate --site SITE [--secrets F] the site's nodes against its specs folder (and the secrets file):
                                        exactly what `spec serve` loads
"""

from __future__ import annotations

from pathlib import Path

from terravixens.config.loader import SITE_LIMIT, SiteError
from terravixens.inputs import InputError, load_yaml, read_text
from terravixens.standalone.catalog import CatalogError, load_catalog, load_spec_file
from terravixens.standalone.resolve import load_standalone


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _is_site_file(path: Path) -> bool:
    try:
        data, _ = load_yaml(read_text(path, limit=SITE_LIMIT, what="file"), path)
    except InputError:
        return False  # reported when loaded as a spec
    return isinstance(data, dict) and "site" in data and "schema_version" not in data


def validate(path: Path | None, site: Path | None, secrets: Path | None) -> tuple[int, str]:
    """(exit code, what to print): 0 and a summary, or 2 and every problem."""
    try:
        if site is None and path is not None and path.is_file() and _is_site_file(path):
            site = path
        if secrets is not None and site is None:
            return 2, "spec validate: --secrets is checked against a site's nodes: give --site SITE"
        if site is not None:
            standalone = load_standalone(site, secrets)
            auth = sorted({node.auth for node in standalone.nodes.values()})
            checked = f", secrets checked ({secrets})" if secrets else " (secrets not checked: give --secrets)"
            return 0, (
                f"{site}: ok — {_plural(len(standalone.nodes), 'standalone node')}, "
                f"{_plural(len(standalone.catalog.specs), 'spec')}, auth {', '.join(auth) or 'none'}{checked}"
            )
        if path is None:
            return 2, "spec validate: give a spec file or folder, or --site SITE [--secrets FILE]"
        if path.is_dir():
            catalog = load_catalog(path)
            custom = [name for kind, name in catalog.files if kind == "posture"]
            return 0, (f"{path}: ok — {_plural(len(catalog.specs), 'spec')}, {_plural(len(custom), 'posture file')}")
        spec, _ = load_spec_file(path)
        return 0, f"{path}: ok — spec {path.stem!r}, posture {spec.access.posture!r}"
    except (SiteError, CatalogError, InputError) as error:
        return 2, str(error)


def site_spec_errors(site: Path | str | None) -> list[InputError]:
    """The same problems as values, one InputError per file (`terravixens validate --json` lists each problem)."""
    import os

    from terravixens.config.loader import DEFAULT_SITE, SITE_ENV

    try:
        load_standalone(Path(site or os.environ.get(SITE_ENV) or DEFAULT_SITE))
    except CatalogError as error:
        return list(error.errors)
    except (SiteError, InputError) as error:
        return [error]
    return []
