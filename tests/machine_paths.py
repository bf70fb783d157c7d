"""What counts as an absolute path of the machine a command ran on (tests/test_docs_paths.py holds the docs to having
none; tests/test_benchmarks.py holds each benchmark's report to it)."""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Where machines keep checkouts, homes and temporary files. Paths a product writes on a node (/etc/terravixens,
# /var/lib/terravixens, the example spec user's /home/ops/.ssh) or that an example names on purpose
# (/proc/self/environ, /dev/sda) are not machine paths.
MACHINE_PATH = re.compile(
    r"(?<![\w.~$/-])/(?:tmp|root|home(?!/ops/\.ssh\b)|work|Users|private|var/folders|mnt)/[^\s`'\")]*"
)


def machine_paths(text: str) -> list[str]:
    """Each absolute path of a machine in `text`: the roots above, this checkout, this interpreter, this $TMPDIR."""
    found = MACHINE_PATH.findall(text)
    return found + [
        path
        for path in (str(ROOT), sys.executable, tempfile.gettempdir())
        if path in text and not any(path in match for match in found)
    ]
