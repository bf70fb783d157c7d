"""A cluster's CSI driver credentials: one entry per cluster in the secrets file, the keys and values of the Secret
the site's `clusters.<cluster>.csi` names, handed to that cluster's gitops layer only, at apply time, and written
into the cluster through a write-only attribute (ADR 0044; the same path as Flux's git credentials, ADR 0034).

    csi:
      prod:                        # a cluster of the site with `csi:`
        username: pve-csi          # whatever the driver's chart reads: csi-driver-smb wants username and password,
        password: "…"              # democratic-csi a driver-config-file.yaml holding the TrueNAS API key…

No message ever shows a value of this section.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Annotated, Any

from pydantic import AfterValidator

from terravixens.catalogue import CSI_VARIABLE
from terravixens.config.model import Site

CSI_ENV = f"TF_VAR_{CSI_VARIABLE}"
# A Secret's data key (Kubernetes: IsConfigMapKey).
DATA_KEY = re.compile(r"^[-._a-zA-Z0-9]{1,253}$")


def _keys(value: dict[str, str]) -> dict[str, str]:
    if not value:
        raise ValueError("is empty: give the Secret's keys and values, e.g. {username: …, password: …}")
    for key, text in value.items():
        if not DATA_KEY.match(key) or key in (".", ".."):
            raise ValueError(
                f"has a key that is no Secret key ({key[:40]!r}): use letters, digits, '-', '_' and '.' (a key is "
                f"a file name in the driver's mounted Secret)"
            )
        if not text:
            raise ValueError(f"key {key!r} has an empty value: give the value or remove the key")
    return value


CsiCredentials = Annotated[dict[str, str], AfterValidator(_keys)]


def clusters_with_csi(site: Site) -> list[str]:
    """The clusters whose gitops layer writes a CSI Secret, sorted."""
    return sorted(name for name, cluster in site.clusters.items() if cluster.csi is not None)


def cross_problems(
    site: Site, entries: dict[str, dict[str, str]], needed: Iterable[str]
) -> Iterator[tuple[tuple[Any, ...], str]]:
    """(location in the secrets file, message) of each entry without a cluster that wants it, and of each cluster in
    `needed` without an entry."""
    wanting = clusters_with_csi(site)
    for name in sorted(entries):
        if name not in wanting:
            yield (
                ("csi", name),
                (
                    f"no cluster {name!r} with csi in the site: remove the entry or fix the name (clusters with csi: "
                    f"{', '.join(wanting) or 'none'})"
                ),
            )
    for name in needed:
        if name not in entries:
            yield (
                ("csi",),
                (
                    f"no entry for cluster {name!r}, whose clusters.{name}.csi asks for a Secret: add csi.{name} with "
                    f"the keys the CSI driver reads (e.g. username and password)"
                ),
            )


def no_secrets_file(needed: Iterable[str]) -> Iterator[tuple[tuple[Any, ...], str]]:
    """(site location, message) for each cluster in `needed` when no secrets file was given at all."""
    for name in needed:
        yield (
            ("clusters", name, "csi"),
            (
                f"asks for a CSI Secret from the secrets file and no secrets file was given: give --secrets FILE (or "
                f"$TERRAVIXENS_SECRETS) holding csi.{name}, or remove csi"
            ),
        )


def csi_variable(entry: dict[str, str]) -> str:
    """The gitops layer's `csi_credentials` variable: the Secret's keys as one JSON object (a string variable, as
    Terraform reads it from the environment verbatim)."""
    return json.dumps(entry, sort_keys=True)
