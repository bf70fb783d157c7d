"""Remote state per layer on an S3-compatible store (moto's server, on loopback), with S3-native locking.

The backend blocks are exactly what terravixens synthesizes for a site with `state.backend: s3`; the stack bodies
are replaced by a built-in `terraform_data` resource (no provider needed), because what is under test is the state:
one key per layer, locking, and that a concurrent apply neither corrupts nor loses anything.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests import s3_store, support
from tests.s3_store import BUCKET
from tests.terraform import terraform_env

pytestmark = pytest.mark.integration

s3_endpoint = s3_store.s3_endpoint  # moto's server, one per module (a fixture)


def _env() -> dict:
    return terraform_env(AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test")


def _stack_dir(tmp_path: Path, name: str, backend: dict, body: dict) -> Path:
    workdir = tmp_path / name
    workdir.mkdir()
    (workdir / "main.tf.json").write_text(json.dumps({"terraform": {"backend": backend}, **body}))
    return workdir


def _tf(binary: str, workdir: Path, *args: str, wait: bool = True):
    command = [binary, *args, "-no-color", "-input=false"]
    if not wait:
        return subprocess.Popen(
            command, cwd=workdir, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
    return subprocess.run(command, cwd=workdir, env=_env(), capture_output=True, text=True, timeout=300)


def _synthesized_backends(endpoint: str) -> dict[str, dict]:
    data = support.example_data()
    data["state"] = {
        "backend": "s3",
        "s3": {"endpoint": endpoint, "bucket": BUCKET, "allow_insecure_http": "moto on loopback, a test emulator"},
    }
    return {name: stack["terraform"]["backend"] for name, stack in support.synth(support.site_from(data)).items()}


def test_each_layer_has_its_own_key(s3_endpoint, terraform_binary, tmp_path):
    endpoint, client = s3_endpoint
    for name, backend in _synthesized_backends(endpoint).items():
        workdir = _stack_dir(tmp_path, name, backend, {"resource": {"terraform_data": {"layer": {"input": name}}}})
        assert _tf(terraform_binary, workdir, "init").returncode == 0
        result = _tf(terraform_binary, workdir, "apply", "-auto-approve")
        assert result.returncode == 0, result.stdout + result.stderr
    keys = sorted(item["Key"] for item in client.list_objects_v2(Bucket=BUCKET, Prefix="terravixens/")["Contents"])
    assert keys == [f"terravixens/homelab/{name}.tfstate" for name in ("gitops-prod", "hypervisors", "platform-prod")]
    state = json.loads(client.get_object(Bucket=BUCKET, Key="terravixens/homelab/platform-prod.tfstate")["Body"].read())
    assert [r["instances"][0]["attributes"]["input"]["value"] for r in state["resources"]] == ["platform-prod"]


def _apply_holding_the_lock(binary: str, endpoint: str, client, tmp_path: Path, layer: str, key: str, seconds: int):
    """Two work dirs on the same state key; the first is applying (and holds the lock) when this returns."""
    backend = _synthesized_backends(endpoint)[layer]
    backend["s3"]["key"] = key
    body = {
        "resource": {
            "terraform_data": {
                "slow": {"input": "kept", "provisioner": [{"local-exec": {"command": f"sleep {seconds}"}}]}
            }
        }
    }
    first_dir = _stack_dir(tmp_path, "first", backend, body)
    second_dir = _stack_dir(tmp_path, "second", backend, body)
    assert _tf(binary, first_dir, "init").returncode == 0
    assert _tf(binary, second_dir, "init").returncode == 0
    first = _tf(binary, first_dir, "apply", "-auto-approve", wait=False)
    for _ in range(100):
        if client.list_objects_v2(Bucket=BUCKET, Prefix=f"{key}.tflock").get("KeyCount"):
            return first, second_dir
        time.sleep(0.1)
    pytest.fail("the first apply never took the lock")


def test_concurrent_apply_of_one_layer_fails_cleanly_then_converges(s3_endpoint, terraform_binary, tmp_path):
    endpoint, client = s3_endpoint
    key = "concurrency/hypervisors.tfstate"
    first, second_dir = _apply_holding_the_lock(terraform_binary, endpoint, client, tmp_path, "hypervisors", key, 6)
    second = _tf(terraform_binary, second_dir, "apply", "-auto-approve")
    first_output, _ = first.communicate(timeout=120)

    assert first.returncode == 0, first_output
    assert second.returncode == 1
    assert "Error acquiring the state lock" in second.stdout + second.stderr
    assert "PreconditionFailed" in second.stdout + second.stderr

    # Nothing lost: the state holds the first apply's resource, the lock is gone, and a rerun converges.
    state = json.loads(client.get_object(Bucket=BUCKET, Key=key)["Body"].read())
    assert [r["name"] for r in state["resources"]] == ["slow"]
    assert not client.list_objects_v2(Bucket=BUCKET, Prefix=f"{key}.tflock").get("KeyCount")
    rerun = _tf(terraform_binary, second_dir, "plan", "-detailed-exitcode")
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr


def test_concurrent_apply_with_lock_timeout_waits(s3_endpoint, terraform_binary, tmp_path):
    endpoint, client = s3_endpoint
    first, second_dir = _apply_holding_the_lock(
        terraform_binary, endpoint, client, tmp_path, "platform-prod", "waiting/platform-prod.tfstate", 4
    )
    second = _tf(terraform_binary, second_dir, "apply", "-auto-approve", "-lock-timeout=60s")
    first.communicate(timeout=120)
    assert first.returncode == 0
    assert second.returncode == 0, second.stdout + second.stderr
    assert "No changes." in second.stdout  # it waited for the lock, then saw the first apply's state
