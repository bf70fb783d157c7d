"""Files we write that can hold secrets (plans, state backups, kubeconfig) are 0600; so is everything Terraform
writes on our behalf (local state, plan files), through the process umask."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from terravixens.exitcodes import ExitCode
from terravixens.operations.outcome import OperationError

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


def require_new_file(path: Path, option: str) -> None:
    """An output file an option names is created, never overwritten (it may be another run's plan, or anyone's file):
    checked before anything runs, so that a bad path costs nothing (BAD_INPUT)."""
    if path.exists() or path.is_symlink():
        raise OperationError(
            f"{option} {path}: the file already exists; give a new path or remove it first (nothing was run)",
            ExitCode.BAD_INPUT,
        )
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        raise OperationError(
            f"{option} {path}: {folder} is not a folder this user can write into; give another path (nothing was run)",
            ExitCode.BAD_INPUT,
        )


def write_new(path: Path, data: str, option: str, private: bool = True) -> Path:
    """Creates `path` (0600 when `private`); an output that cannot be written is BAD_INPUT, never a traceback."""
    try:
        if private:
            return write_private(path, data)
        with open(path, "x", encoding="utf-8") as handle:
            handle.write(data)
        return path
    except FileExistsError:
        raise OperationError(
            f"{option} {path}: the file already exists; give a new path or remove it first", ExitCode.BAD_INPUT
        ) from None
    except OSError as error:
        raise OperationError(f"{option} {path}: cannot write it ({error.strerror})", ExitCode.BAD_INPUT) from None


def remove_quietly(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


@contextlib.contextmanager
def private_directory(prefix: str = "terravixens-") -> Iterator[Path]:
    """A 0700 temporary directory, removed with everything in it afterwards."""
    with tempfile.TemporaryDirectory(prefix=prefix) as name:
        os.chmod(name, 0o700)
        yield Path(name)
