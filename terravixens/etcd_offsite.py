"""Offsite etcd backups (ADR 0059): what the in-cluster job wrote to an S3-compatible bucket, read back.

    list_backups(bucket, cluster)            the cluster's `<prefix>/<cluster>-<time>.snap.age` objects, oldest first
    download(bucket, key, to, limit, budget) one object, bounded in bytes and in wall-clock time, written 0600
    decrypt(encrypted, identity, to)         age's own decryption (tools/age, filippo.io/age: what talos-backup
                                             encrypts with), through the bounded runner; the identity never on a
                                             command line (a 0600 file in a 0700 folder, removed)
    recipient_of(identity)                   `age-keygen -y`: the public key an identity decrypts for

The S3 client is boto3 (the `backup` extra: `pip install 'terravixens[backup]'`), imported only here and only when
a bucket is read: a site without etcd_backup never needs it. Every failure is an OffsiteError, one line, naming the
bucket and key, never a credential.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from terravixens.runner import run

AGE_ENV, AGE_KEYGEN_ENV = "TERRAVIXENS_AGE", "TERRAVIXENS_AGE_KEYGEN"
TOOLS = Path(__file__).resolve().parent.parent / "tools" / "age" / "bin"
SUFFIX = ".snap.age"
# A snapshot is etcd's database: gigabytes for a big cluster. What --from s3:// downloads at most, and for how long.
DOWNLOAD_LIMIT = 16 * 1024**3
DOWNLOAD_BUDGET = 30 * 60.0
CHUNK = 1 << 20
CALL_TIMEOUT = 60.0
LIST_LIMIT = 100_000  # objects read under a prefix at most
URL = re.compile(r"^s3://([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])/(.+)$")


class OffsiteError(Exception):
    """A listing, download or decryption that could not be done: one line, no credential in it."""


@dataclass(frozen=True)
class Bucket:
    """Where one cluster's backups are, and the keys to read them (from the secrets file; never printed)."""

    endpoint: str
    bucket: str
    prefix: str
    region: str
    access_key_id: str
    secret_access_key: str

    def url(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"

    def __repr__(self) -> str:  # no credential in a traceback or a log
        return f"Bucket({self.endpoint!r}, {self.bucket!r}, {self.prefix!r})"


@dataclass(frozen=True)
class RemoteBackup:
    key: str
    size: int
    modified: datetime  # the store's LastModified, UTC: when the upload finished
    url: str


def parse_url(text: str) -> tuple[str, str]:
    """`s3://BUCKET/KEY` -> (bucket, key); ValueError with the form to use."""
    match = URL.match(text)
    if match is None or match.group(2).startswith("/") or ".." in match.group(2).split("/"):
        raise ValueError(f"{text[:120]!r} is not s3://BUCKET/KEY (a key as `terravixens snapshot --list` shows it)")
    return match.group(1), match.group(2)


def _client(bucket: Bucket) -> Any:
    try:
        import boto3
        from botocore.config import Config
    except ModuleNotFoundError:
        raise OffsiteError(
            "reading offsite backups needs boto3, which is not installed: pip install 'terravixens[backup]'"
        ) from None
    return boto3.client(
        "s3",
        endpoint_url=bucket.endpoint,
        region_name=bucket.region,
        aws_access_key_id=bucket.access_key_id,
        aws_secret_access_key=bucket.secret_access_key,
        config=Config(
            connect_timeout=10,
            read_timeout=CALL_TIMEOUT,
            retries={"max_attempts": 3, "mode": "standard"},
            s3={"addressing_style": "path"},
        ),
    )


def _why(error: Exception) -> str:
    """botocore's own words (an error code and message, or the connection's), without any credential."""
    response = getattr(error, "response", None)
    if isinstance(response, dict) and "Error" in response:
        detail = response["Error"]
        return f"{detail.get('Code', '?')}: {detail.get('Message', '')}".strip(": ")
    return f"{type(error).__name__}: {error}"[:300]


def list_backups(bucket: Bucket, cluster: str) -> list[RemoteBackup]:
    """The cluster's backups under the prefix (`<prefix>/<cluster>-*.snap.age`), oldest first."""
    start = f"{bucket.prefix}/{cluster}-"
    client = _client(bucket)
    found: list[RemoteBackup] = []
    try:
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket.bucket, Prefix=start)
        for page in pages:
            for item in page.get("Contents", []):
                key = item["Key"]
                if key.endswith(SUFFIX) and "/" not in key[len(start) :]:
                    modified = item["LastModified"].astimezone(UTC)
                    found.append(RemoteBackup(key, int(item["Size"]), modified, bucket.url(key)))
                if len(found) > LIST_LIMIT:
                    raise OffsiteError(f"more than {LIST_LIMIT:,} objects under {bucket.url(start)}: prune them")
    except OffsiteError:
        raise
    except Exception as error:  # botocore's ClientError, EndpointConnectionError, …: all of them a failed listing
        raise OffsiteError(f"cannot list {bucket.url(start)}* at {bucket.endpoint}: {_why(error)}") from None
    return sorted(found, key=lambda backup: (backup.modified, backup.key))


def download(bucket: Bucket, key: str, to: Path, limit: int = DOWNLOAD_LIMIT, budget: float = DOWNLOAD_BUDGET) -> int:
    """The object written to `to` (created 0600, never over an existing file), at most `limit` bytes, within
    `budget` seconds of wall-clock time; its size. A partial file is removed."""
    client = _client(bucket)
    deadline = time.monotonic() + budget
    try:
        answer = client.get_object(Bucket=bucket.bucket, Key=key)
    except Exception as error:
        raise OffsiteError(f"cannot read {bucket.url(key)}: {_why(error)}") from None
    declared = int(answer.get("ContentLength") or 0)
    if declared > limit:
        answer["Body"].close()
        raise OffsiteError(f"{bucket.url(key)} is {declared:,} bytes, more than the {limit:,} a restore reads")
    fd = os.open(to, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    size = 0
    try:
        with os.fdopen(fd, "wb") as out:
            body = answer["Body"]
            while True:
                if time.monotonic() > deadline:
                    raise OffsiteError(f"{bucket.url(key)}: not downloaded within {budget:g} s")
                chunk = body.read(CHUNK)
                if not chunk:
                    break
                size += len(chunk)
                if size > limit:
                    raise OffsiteError(f"{bucket.url(key)} holds more than the {limit:,} bytes a restore reads")
                out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
    except OffsiteError:
        to.unlink(missing_ok=True)
        raise
    except Exception as error:
        to.unlink(missing_ok=True)
        raise OffsiteError(f"{bucket.url(key)}: the download broke off: {_why(error)}") from None
    return size


def _tool(environment: str, name: str) -> str:
    given = os.environ.get(environment)
    if given:
        if not Path(given).is_file():
            raise OffsiteError(f"${environment} names {given}, which is not a file")
        return given
    built = TOOLS / name
    if built.is_file():
        return str(built)
    found = shutil.which(name)
    if found is None:
        raise OffsiteError(
            f"{name} is not found: `make tools` builds it (tools/age, filippo.io/age), or install age "
            f"(Debian: apt install age), or set ${environment}"
        )
    return found


@contextlib.contextmanager
def _identity_file(identity: str) -> Iterator[Path]:
    """The identity in a 0600 file of a 0700 folder, removed afterwards: age reads identities from files (-i)."""
    folder = Path(tempfile.mkdtemp(prefix="terravixens-age-"))
    try:
        path = folder / "identity"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(identity.strip() + "\n")
        yield path
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def decrypt(encrypted: Path, identity: str, to: Path, timeout: float = DOWNLOAD_BUDGET) -> None:
    """`age --decrypt -i IDENTITY -o TO ENCRYPTED`; `to` made 0600. age refuses a file encrypted to another key, or
    changed on the way (its payload is authenticated chunk by chunk): the line says so."""
    age = _tool(AGE_ENV, "age")
    with _identity_file(identity) as key:
        ran = run(
            [age, "--decrypt", "-i", str(key), "-o", str(to), str(encrypted)],
            timeout=timeout,
            label="age --decrypt",
        )
    if not ran.ok:
        to.unlink(missing_ok=True)
        raise OffsiteError(f"age could not decrypt {encrypted.name}: {ran.reason}")
    to.chmod(0o600)


def recipient_of(identity: str) -> str:
    """The `age1…` recipient of an identity (`age-keygen -y`)."""
    keygen = _tool(AGE_KEYGEN_ENV, "age-keygen")
    ran = run([keygen, "-y"], timeout=CALL_TIMEOUT, input=identity.strip() + "\n", label="age-keygen -y")
    if not ran.ok:
        raise OffsiteError(f"age-keygen -y could not read the identity: {ran.reason}")
    return ran.stdout.strip()


def age_of(backup: RemoteBackup, now: datetime) -> str:
    seconds = max(0, int((now - backup.modified).total_seconds()))
    if seconds < 3600:
        return f"{seconds // 60}m"
    if seconds < 86400 * 2:
        return f"{seconds // 3600}h{(seconds % 3600) // 60:02d}m"
    return f"{seconds // 86400}d{(seconds % 86400) // 3600}h"


def endpoint_host(endpoint: str) -> str:
    return urlsplit(endpoint).netloc or endpoint
