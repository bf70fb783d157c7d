"""Exit codes shared by the operations (docs/commands.md lists them per command)."""
from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0              # applied, or nothing to do
    REFUSED = 1         # the plan guard refused a plan (nothing applied)
    BAD_INPUT = 2       # a site file, plan, backup or argument that cannot be used
    DECLINED = 3        # the operator did not confirm (nothing applied)
    TERRAFORM_FAILED = 4  # terraform init/plan/apply failed (state intact: see the backup path printed)
    BACKUP_FAILED = 5   # the state could not be backed up or the backup not verified (nothing applied)


class OperationError(Exception):
    """A stop with a message for the operator and an exit code; never a traceback."""

    def __init__(self, message: str, code: ExitCode):
        super().__init__(message)
        self.code = code
