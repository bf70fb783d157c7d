"""Backends are always declared explicitly: cdktf's implicit local backend writes an absolute path into the JSON.

Local state lives at <project>/<local_dir>/<stack>.tfstate, written as a path relative to the stack's working
directory (cdktf.out/stacks/<stack>/), so the synthesized JSON is the same on every machine.
S3-compatible state uses one key per stack (layer) under the site's key prefix, with S3-native locking, server-side
encryption on by default (optionally with a KMS key) and https endpoints only unless the site allows http.
"""

from __future__ import annotations

from typing import Any

from cdktf import DataTerraformRemoteStateLocal, DataTerraformRemoteStateS3, LocalBackend, S3Backend, TerraformStack
from constructs import Construct

from terravixens.config.model import S3State, StateConfig
from terravixens.layers import state_key, state_path

# cdktf runs Terraform in cdktf.out/stacks/<stack>/: three levels below the project root.
PROJECT_ROOT_FROM_STACK = "../../.."


def local_state_path(state: StateConfig, stack_name: str) -> str:
    return f"{PROJECT_ROOT_FROM_STACK}/{state_path(state, stack_name)}"


def s3_key(state: StateConfig, site: str, stack_name: str) -> str:
    return state_key(state, site, stack_name)


def _s3(state: StateConfig) -> S3State:
    if state.s3 is None:  # the site model refuses this; a library user may build a StateConfig without validation
        raise ValueError("state.backend is 's3' but state.s3 is not set: add state.s3.endpoint and state.s3.bucket")
    return state.s3


def _s3_settings(s3: S3State) -> dict[str, Any]:
    return dict(
        bucket=s3.bucket,
        region=s3.region,
        endpoints={"s3": s3.endpoint},
        use_path_style=s3.use_path_style,
        skip_credentials_validation=True,
        skip_region_validation=True,
        skip_requesting_account_id=True,
        skip_metadata_api_check=True,
        skip_s3_checksum=True,
        encrypt=s3.encrypt,
        **({"kms_key_id": s3.kms_key_id} if s3.kms_key_id else {}),
    )


def declare_backend(stack: TerraformStack, state: StateConfig, site: str, stack_name: str) -> None:
    if state.backend == "local":
        LocalBackend(stack, path=local_state_path(state, stack_name))
    else:
        s3 = _s3(state)
        backend = S3Backend(stack, key=s3_key(state, site, stack_name), **_s3_settings(s3))
        # cdktf 0.21 predates S3-native locking (Terraform >= 1.10): set the argument directly.
        backend.add_override("use_lockfile", s3.use_lockfile)


def remote_state(
    scope: Construct, id: str, state: StateConfig, site: str, stack_name: str
) -> DataTerraformRemoteStateLocal | DataTerraformRemoteStateS3:
    """Reads another layer's outputs at plan time; synth needs nothing from that layer."""
    if state.backend == "local":
        return DataTerraformRemoteStateLocal(scope, id, path=local_state_path(state, stack_name))
    return DataTerraformRemoteStateS3(scope, id, key=s3_key(state, site, stack_name), **_s3_settings(_s3(state)))
