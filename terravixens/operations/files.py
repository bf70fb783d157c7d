"""Files we write that can hold secrets (plans, state backups, kubeconfig) are 0600; so is everything Terraform
writes on our behalf (local state, plan files), through the process umask."""
from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

PRIVATE_UMASK = 0o077


def private_process() -> int:
    """Sets umask 077 for this process and the Terraform it starts; returns the previous umask."""
    return os.umask(PRIVATE_UMASK)


def write_private(path: Path, data: str | bytes) -> Path:
    """Creates `path` (never overwrites) with mode 0600, whatever the umask, and its folders with 0700."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data.encode() if isinstance(data, str) else data)
    os.chmod(path, 0o600)
    return path


def remove_quietly(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


@contextlib.contextmanager
def private_directory(prefix: str = "terravixens-") -> Iterator[Path]:
    """A 0700 temporary directory, removed with everything in it afterwards."""
    with tempfile.TemporaryDirectory(prefix=prefix) as name:
        os.chmod(name, 0o700)
        yield Path(name)
