import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROJECT_NODE = ROOT / "node_modules" / ".bin" / "node"

# jsii runs its kernel on `node`: use the project's pinned Node.js (22) when present, as `make` does.
if PROJECT_NODE.exists() and "JSII_NODE" not in os.environ:
    os.environ["JSII_NODE"] = str(PROJECT_NODE)
os.environ.setdefault("NODE_OPTIONS", "--disable-warning=DEP0044")

from tests import support  # noqa: E402


@pytest.fixture(scope="session")
def example_site():
    return support.site_from(support.example_data())


@pytest.fixture(scope="session")
def example_synth(example_site, tmp_path_factory):
    """The example site synthesized once per session (read-only for tests)."""
    return support.synth(example_site, tmp_path_factory.mktemp("example"))


@pytest.fixture(scope="session")
def terraform_binary():
    """The CLI scripts/providers.py chose: $TERRAFORM_BINARY_NAME, else terraform, else the OpenTofu it built."""
    from terravixens.provider_install import cache_dir

    cache_bin = cache_dir() / "bin"
    wanted = os.environ.get("TERRAFORM_BINARY_NAME")
    candidates = [wanted] if wanted else ["terraform", "tofu"]
    for name in candidates:
        found = shutil.which(name) or (str(cache_bin / name) if (cache_bin / name).exists() else None)
        if found:
            return found
    pytest.fail(f"no {' or '.join(candidates)} CLI: run `make mirror` (it builds OpenTofu when terraform is missing)")
