"""moto's S3 server on loopback, one per test module (`s3_endpoint`: its URL and a boto3 client, the bucket
created): the S3 state backend's tests and the operations' S3 cases use it."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.loopback import free_port

BUCKET = "tfstate"


@contextlib.contextmanager
def moto_s3(tmp_path_factory, bucket: str) -> Iterator[tuple[str, Any]]:
    """moto's S3 server on a free loopback port with `bucket` created: (its URL, a boto3 client); stopped after."""
    port = free_port()
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        import boto3

        client = boto3.client(
            "s3", endpoint_url=endpoint, aws_access_key_id="test", aws_secret_access_key="test", region_name="us-east-1"
        )
        for _ in range(200):
            try:
                client.create_bucket(Bucket=bucket)
                break
            except Exception:  # server still starting
                time.sleep(0.1)
        else:
            pytest.fail(f"moto server did not start: {log.read_text()}")
        yield endpoint, client
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.fixture(scope="module")
def s3_endpoint(tmp_path_factory):
    with moto_s3(tmp_path_factory, BUCKET) as found:
        yield found
