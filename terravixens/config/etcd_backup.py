"""Scheduled offsite etcd backups of a cluster (issue 30 item 1, ADR 0059): `clusters.<name>.etcd_backup`.

    clusters:
      prod:
        etcd_backup:
          schedule: "0 */6 * * *"                 # a CronJob schedule (UTC): every six hours
          endpoint: https://minio.lab.internal:9000
          bucket: etcd-backups
          prefix: prod                            # keys: <prefix>/<cluster>-<RFC 3339 time>.snap.age
          keep: 28                                # the newest 28 backups stay; older ones are deleted after a new one
          age_recipient: age1…                    # the public key the snapshots are encrypted to

The gitops layer deploys a CronJob in the cluster (terravixens.constructs.etcd_backup) that takes a snapshot through
the Talos API with a Talos service account limited to `os:etcd:backup`, encrypts it to `age_recipient` and writes it
to the bucket; the control planes' configuration allows that role (machine.features.kubernetesTalosAPIAccess). The
S3 credentials are the secrets file's `etcd_backup.<cluster>` (never in the site, the JSON or the state); so is the
age identity that decrypts them, for `terravixens restore-etcd --from s3://…`.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field, ValidationInfo, field_validator, model_validator

from terravixens.config import cron
from terravixens.config.fields import INSECURE_HTTP, InsecureHttpReason, Strict, checked_url, unused_insecure_http
from terravixens.config.storage import namespace_name
from terravixens.inputs import shown

# S3 bucket names (AWS's rules, which MinIO and Ceph RGW follow): 3-63 lowercase letters, digits, '-' and '.'.
BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
# A key prefix: path segments of safe characters, no leading or trailing '/', no '..'.
PREFIX = re.compile(r"^[A-Za-z0-9!_.*'()-]+(/[A-Za-z0-9!_.*'()-]+)*$")
# An age X25519 recipient: "age1" and 58 characters of bech32's alphabet (age's format).
AGE_RECIPIENT = re.compile(r"^age1[qpzry9x8gf2tvdw0s3jn54khce6mua7l]{58}$")
# The CronJob, its Talos service account (and the Secret Talos writes for it), and the S3 credentials Secret.
JOB_NAME = "terravixens-etcd-backup"
CREDENTIALS_SECRET = "terravixens-etcd-backup-s3"
# siderolabs/talos-backup, the job Talos' own documentation and the Hetzner module run (ADR 0059).
TALOS_BACKUP_IMAGE = "ghcr.io/siderolabs/talos-backup:v0.1.0-beta.2"
AWS_CLI_IMAGE = "docker.io/amazon/aws-cli:2.22.0"


def schedule_value(value: str) -> str:
    try:
        cron.parse(value)
    except ValueError as error:
        raise ValueError(f"{shown(value)} is not a CronJob schedule: {error}") from None
    return value


def bucket_value(value: str) -> str:
    if not BUCKET.match(value) or ".." in value:
        raise ValueError(
            f"{shown(value)} is not an S3 bucket name: 3 to 63 lowercase letters, digits, '-' and '.', starting and "
            f"ending with a letter or digit (e.g. 'etcd-backups')"
        )
    return value


def prefix_value(value: str) -> str:
    if not PREFIX.match(value) or ".." in value.split("/"):
        raise ValueError(
            f"{shown(value)} is not a key prefix: path segments of letters, digits and ! _ . * ' ( ) -, joined by "
            f"'/', without a leading or trailing '/' (e.g. 'prod' or 'backups/prod')"
        )
    return value


def optional_prefix(value: str | None) -> str | None:
    return value if value is None else prefix_value(value)


def age_recipient_value(value: str) -> str:
    if value.startswith("AGE-SECRET-KEY-"):
        # Never echoed: an identity pasted here would reach the synthesized JSON and the cluster.
        raise ValueError(
            "is an age identity (a private key): give its public key (`age-keygen -y`, 'age1…'); keep the identity "
            "in the secrets file's etcd_backup.<cluster>.age_identity, and treat this one as leaked"
        )
    if not AGE_RECIPIENT.match(value):
        raise ValueError(f"{shown(value)} is not an age X25519 recipient: give the 'age1…' line of `age-keygen -y`")
    return value


def image_value(value: str) -> str:
    if not re.match(r"^[a-z0-9]([a-z0-9._/:@-]*[A-Za-z0-9_])?$", value) or " " in value:
        raise ValueError(f"{shown(value)} is not a container image reference, e.g. {TALOS_BACKUP_IMAGE!r}")
    return value


class EtcdBackup(Strict):
    """Where and how often the cluster backs its etcd up, encrypted, off the operator's machine."""

    schedule: Annotated[str, AfterValidator(schedule_value)] = Field(
        description="When the backup job runs: a CronJob schedule, UTC (five cron fields, or @hourly, @daily…), "
        "e.g. `0 */6 * * *`. `terravixens check` reports a problem when the newest backup is older than two runs."
    )
    # Before endpoint: its validator reads this reason (pydantic validates fields in order).
    allow_insecure_http: InsecureHttpReason = Field(None, description=INSECURE_HTTP)
    endpoint: str = Field(description="S3-compatible endpoint (MinIO, Ceph RGW, AWS), e.g. `https://minio.lab:9000`.")
    bucket: Annotated[str, AfterValidator(bucket_value)] = Field(
        description="The bucket the encrypted snapshots go to."
    )
    prefix: Annotated[str | None, AfterValidator(optional_prefix)] = Field(
        None,
        description="Key prefix: objects are `<prefix>/<cluster>-<time>.snap.age`; default: the cluster's name.",
    )
    region: str = Field("us-east-1", description="The bucket's region (MinIO and Ceph accept any).")
    keep: int = Field(
        28,
        ge=1,
        le=10_000,
        description="The newest `keep` backups stay; after each new one the job deletes older ones under the "
        "prefix (never the new one, never anything but `*.snap.age`).",
    )
    age_recipient: Annotated[str, AfterValidator(age_recipient_value)] = Field(
        description="The age X25519 public key (`age1…`) the snapshots are encrypted to; its identity goes in the "
        "secrets file (`etcd_backup.<cluster>.age_identity`), never here."
    )
    namespace: Annotated[str, AfterValidator(namespace_name)] = Field(
        "kube-system",
        description="Namespace of the job, its Talos service account and the S3 credentials Secret; Talos' API "
        "access is allowed from this namespace only.",
    )
    credentials_revision: int = Field(
        1,
        ge=1,
        description="Bump after changing `etcd_backup.<cluster>` in the secrets file: the credentials Secret is "
        "written through a write-only attribute, so Terraform re-sends it only when this number changes.",
    )
    image: Annotated[str, AfterValidator(image_value)] = Field(
        TALOS_BACKUP_IMAGE,
        description="The backup image: siderolabs/talos-backup (snapshot through the Talos API, age, S3); a "
        "mirror of it for an air-gapped site.",
    )
    prune_image: Annotated[str, AfterValidator(image_value)] = Field(
        AWS_CLI_IMAGE,
        description="The image that applies `keep` (the AWS CLI, which speaks to any S3-compatible store).",
    )

    @field_validator("endpoint")
    @classmethod
    def _https(cls, value: str, info: ValidationInfo) -> str:
        return checked_url(value, info, example="https://minio.lab.internal:9000")

    @model_validator(mode="after")
    def _reason_used(self) -> EtcdBackup:
        unused_insecure_http(self, "endpoint")
        return self

    def key_prefix(self, cluster: str) -> str:
        return self.prefix or cluster
