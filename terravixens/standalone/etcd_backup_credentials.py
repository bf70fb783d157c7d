"""A cluster's offsite etcd backup credentials (ADR 0059): one entry per cluster with `etcd_backup` in the site.

    etcd_backup:
      prod:
        access_key_id: "…"           # the S3 key the backup job writes (and prunes) with; restore-etcd and
        secret_access_key: "…"       # `snapshot --list` read with it too
        age_identity: AGE-SECRET-KEY-1…   # optional: what restore-etcd --from s3://… decrypts with (else --identity)

The S3 pair is handed to that cluster's gitops layer only, at apply time (TF_VAR_etcd_backup_credentials), and
written into the cluster through a write-only attribute: in neither the synthesized JSON, the plan nor the state
(the path of Flux's credentials and the CSI Secret, ADR 0034, 0044). The identity never leaves this machine. No
message ever shows a value of this section.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Annotated, Any

from pydantic import AfterValidator, Field

from terravixens.catalogue import BACKUP_SECRET_KEYS, BACKUP_VARIABLE
from terravixens.config.fields import Strict
from terravixens.config.model import Site

BACKUP_ENV = f"TF_VAR_{BACKUP_VARIABLE}"
SECRET_KEYS = BACKUP_SECRET_KEYS
# age's identity: "AGE-SECRET-KEY-1" and 58 upper-case bech32 characters.
AGE_IDENTITY = re.compile(r"^AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}$")


def _one_line(value: str) -> str:
    if not value or any(character.isspace() for character in value) or len(value) > 1024:
        raise ValueError("is not one word of 1 to 1024 characters without spaces: give the key as the store shows it")
    return value


def _identity(value: str) -> str:
    if not AGE_IDENTITY.match(value.strip()):
        raise ValueError("is not an age identity: give the AGE-SECRET-KEY-1… line that age-keygen wrote")
    return value.strip()


class BackupCredentials(Strict):
    access_key_id: Annotated[str, AfterValidator(_one_line)] = Field(description="S3 access key id.")
    secret_access_key: Annotated[str, AfterValidator(_one_line)] = Field(description="S3 secret access key.")
    age_identity: Annotated[str | None, AfterValidator(lambda v: v if v is None else _identity(v))] = Field(
        None, description="The age identity the snapshots decrypt with (restore-etcd --from s3://…)."
    )


def clusters_with_backup(site: Site) -> list[str]:
    """The clusters whose gitops layer deploys an offsite backup job, sorted."""
    return sorted(name for name, cluster in site.clusters.items() if cluster.etcd_backup is not None)


def cross_problems(
    site: Site, entries: dict[str, BackupCredentials], needed: Iterable[str]
) -> Iterator[tuple[tuple[Any, ...], str]]:
    """(location in the secrets file, message): an entry without a cluster that backs up, a needed one missing."""
    wanting = clusters_with_backup(site)
    for name in sorted(entries):
        if name not in wanting:
            yield (
                ("etcd_backup", name),
                (
                    f"no cluster {name!r} with etcd_backup in the site: remove the entry or fix the name (clusters "
                    f"with etcd_backup: {', '.join(wanting) or 'none'})"
                ),
            )
    for name in needed:
        if name not in entries:
            yield (
                ("etcd_backup",),
                (
                    f"no entry for cluster {name!r}, whose clusters.{name}.etcd_backup writes to S3: add "
                    f"etcd_backup.{name} with access_key_id and secret_access_key (and age_identity, for restores)"
                ),
            )


def no_secrets_file(needed: Iterable[str]) -> Iterator[tuple[tuple[Any, ...], str]]:
    for name in needed:
        yield (
            ("clusters", name, "etcd_backup"),
            (
                f"writes backups with S3 credentials from the secrets file and no secrets file was given: give "
                f"--secrets FILE (or $TERRAVIXENS_SECRETS) holding etcd_backup.{name}, or remove etcd_backup"
            ),
        )


def backup_variable(entry: BackupCredentials) -> str:
    """The gitops layer's `etcd_backup_credentials` variable: the Secret's keys (the AWS SDK's names) as one JSON
    object. The age identity is not in it: the cluster only encrypts."""
    return json.dumps(dict(zip(SECRET_KEYS, (entry.access_key_id, entry.secret_access_key), strict=True)))
