"""Debian's cloud-init, unpacked by `make setup-test` (tools/cloud-init/install.sh): `cloud-init schema` judges every
cloud-init document the L2 stacks render (tests/test_cloud_init_schema.py, tests/integration/test_standalone.py)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

CLOUD_INIT = Path(os.environ.get("TERRAVIXENS_CACHE", Path.home() / ".cache/terravixens")) / "cloud-init/cloud-init"


def cloud_init_schema(path: Path) -> subprocess.CompletedProcess:
    assert CLOUD_INIT.exists(), f"{CLOUD_INIT} is missing: run `make setup-test` (tools/cloud-init/install.sh)"
    return subprocess.run(
        [str(CLOUD_INIT), "schema", "--config-file", str(path)], capture_output=True, text=True, timeout=120
    )
