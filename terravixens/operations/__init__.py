"""Operations an operator runs against a site: deploy, destroy, decommission, dead control plane removal, drift,
review, restore, upgrade, … Each command lives in its own module (its arguments, its run function, its exit codes:
terravixens.arguments.Definition); `terravixens.cli` names it in its command table.

Shared pieces (steps, tests/test_operations_structure.py): `terraform` (the runner: the user's TERRAFORM_BINARY_NAME
and TF_CLI_CONFIG_FILE are respected), `workspace` (synth into cdktf.out and the per-stack directories, with a seam
for tests), `files` (0600 files, umask 077), `backup` (state pull, timestamped backup, verification, restore),
`summary` (per-node view of a plan). Exit codes come from the one table, terravixens.exitcodes.
"""

from terravixens.operations.outcome import OperationError

__all__ = ["OperationError"]
