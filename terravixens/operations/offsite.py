"""A step shared by `snapshot --list`, `restore-etcd --from s3://…` and `check`: a cluster's offsite backup bucket, as
the site names it (`clusters.<name>.etcd_backup`) with the keys of the secrets file (`etcd_backup.<cluster>`), and
the age identity a restore decrypts with (`--identity FILE`, else the secrets file's `age_identity`). See
docs/adr/0059-disaster-recovery-and-zero-touch-nodes.md.

Problems are OperationError (BAD_INPUT), each naming the file or option to fix and never a value of the secrets file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from terravixens.config.etcd_backup import EtcdBackup
from terravixens.config.model import Site
from terravixens.etcd_offsite import Bucket
from terravixens.exitcodes import ExitCode
from terravixens.inputs import InputError, read_text
from terravixens.operations.outcome import OperationError
from terravixens.standalone.etcd_backup_credentials import AGE_IDENTITY, BackupCredentials
from terravixens.standalone.secrets import SECRETS_ENV, load_secrets

IDENTITY_LIMIT = 64 * 1024


@dataclass(frozen=True)
class Offsite:
    bucket: Bucket
    credentials: BackupCredentials
    backup: EtcdBackup  # the site's clusters.<name>.etcd_backup the bucket comes from


def secrets_path(given: str | None) -> str | None:
    return given or os.environ.get(SECRETS_ENV) or None


def configured(site: Site, cluster_name: str) -> bool:
    cluster = site.clusters.get(cluster_name)
    return cluster is not None and cluster.etcd_backup is not None


def offsite(site: Site, cluster_name: str, secrets: str | None) -> Offsite:
    """The cluster's bucket and credentials; BAD_INPUT when the site has no etcd_backup for it, no secrets file is
    given, or the file has no entry for it."""
    backup = site.clusters[cluster_name].etcd_backup
    if backup is None:
        raise OperationError(
            f"cluster {cluster_name!r} has no etcd_backup in the site: no offsite backups to read (add "
            f"clusters.{cluster_name}.etcd_backup, docs/adr/0059)",
            ExitCode.BAD_INPUT,
        )
    path = secrets_path(secrets)
    if path is None:
        raise OperationError(
            f"the offsite backups of {cluster_name} are read with the secrets file's etcd_backup.{cluster_name}: "
            f"give --secrets FILE (or ${SECRETS_ENV})",
            ExitCode.BAD_INPUT,
        )
    try:
        loaded, _ = load_secrets(path)
    except InputError as error:
        raise OperationError(str(error), ExitCode.BAD_INPUT) from None
    entry = loaded.etcd_backup.get(cluster_name)
    if entry is None:
        raise OperationError(
            f"{path}: no etcd_backup.{cluster_name} (access_key_id, secret_access_key): the offsite backups of "
            f"{cluster_name} cannot be read without them",
            ExitCode.BAD_INPUT,
        )
    bucket = Bucket(
        backup.endpoint,
        backup.bucket,
        backup.key_prefix(cluster_name),
        backup.region,
        entry.access_key_id,
        entry.secret_access_key,
    )
    return Offsite(bucket, entry, backup)


def identity(found: Offsite, cluster_name: str, given: str | None, secrets: str | None) -> str:
    """The age identity: `--identity FILE` (0600, one AGE-SECRET-KEY-1… line among comments, as age-keygen writes
    it), else the secrets file's etcd_backup.<cluster>.age_identity."""
    if given is None:
        if found.credentials.age_identity is None:
            raise OperationError(
                f"no age identity to decrypt the backup with: give --identity FILE (age-keygen's output) or add "
                f"etcd_backup.{cluster_name}.age_identity to {secrets_path(secrets)}",
                ExitCode.BAD_INPUT,
            )
        return found.credentials.age_identity
    from terravixens.inputs import private_mode_problem

    problem = private_mode_problem(given, "age identity")
    if problem is not None:
        raise OperationError(f"--identity {given}: {problem.message}", ExitCode.BAD_INPUT)
    try:
        text = read_text(given, limit=IDENTITY_LIMIT, what="age identity")
    except InputError as error:
        raise OperationError(f"--identity {given}: {str(error).splitlines()[-1].strip()}", ExitCode.BAD_INPUT) from None
    keys = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    if len(keys) != 1 or not AGE_IDENTITY.match(keys[0]):
        raise OperationError(
            f"--identity {given}: holds {len(keys)} key line(s), not one AGE-SECRET-KEY-1… line (age-keygen's output)",
            ExitCode.BAD_INPUT,
        )
    return keys[0]
