"""The agent as one zipapp: its modules and the terravixens modules they import, nothing else (all standard library
only), so a guest with python3 runs it without installing terravixens (`python3 agent.pyz converge …`, or on
PYTHONPATH: `python3 -m terravixens.agent`, as the units and cloud-init's first boot do).

Which modules go in is measured, not listed: a fresh interpreter imports the agent's command line and names every
terravixens module it loaded — a new import in the agent is in the next bundle without anyone editing a list. The
archive's bytes depend only on those files (fixed timestamps, sorted names), so two builds compare equal.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import sys
import zipfile
from pathlib import Path

from terravixens.runner import run

PACKAGE_ROOT = Path(__file__).resolve().parents[2]
MAIN = "import sys\n\nfrom terravixens.agent.cli import main\n\nsys.exit(main())\n"
LISTING = (
    "import json, sys\n"
    "import terravixens.agent.cli\n"
    "print(json.dumps(sorted(m.__file__ for n, m in list(sys.modules.items()) "
    "if n == 'terravixens' or n.startswith('terravixens.'))))\n"
)


class BundleError(Exception):
    """The agent's modules could not be listed."""


def module_files() -> list[Path]:
    ran = run([sys.executable, "-c", LISTING], timeout=60, cwd=PACKAGE_ROOT, label="python3 (agent modules)")
    if not ran.ok:
        raise BundleError(f"cannot list the agent's modules: {ran.reason}")
    return [Path(name) for name in json.loads(ran.stdout)]


def build() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        entries = {"__main__.py": MAIN.encode()}
        # -m terravixens.agent (units, first boot) runs the package's __main__, which nothing imports.
        for path in [*module_files(), Path(__file__).with_name("__main__.py")]:
            entries[path.relative_to(PACKAGE_ROOT).as_posix()] = path.read_bytes()
        for name in sorted(entries):
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, entries[name])
    return buffer.getvalue()


@functools.cache
def built() -> tuple[bytes, str]:
    """The bundle of the installed package and its SHA-256 (hex), built once per process: what `spec serve` serves
    at GET /agent.pyz and what `terravixens deploy` pins in a VM's node.env (ADR 0059). Same package, same bytes."""
    data = build()
    return data, hashlib.sha256(data).hexdigest()
