"""What an operation ends with: an exit code from the one table (terravixens.exitcodes, imported from there by
everyone), or an OperationError carrying its message and code."""

from __future__ import annotations

from terravixens.exitcodes import ExitCode


class OperationError(Exception):
    """A stop with a message for the operator and an exit code; never a traceback."""

    def __init__(self, message: str, code: ExitCode):
        super().__init__(message)
        self.code = code


__all__ = ["OperationError"]
