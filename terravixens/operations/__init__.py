"""Operations an operator runs against a site: deploy, destroy, decommission, dead control plane removal, drift,
review, restore. Each lives in its own module; `terravixens.cli` only parses arguments and dispatches here.

Shared pieces: `terraform` (the runner: the user's TERRAFORM_BINARY_NAME and TF_CLI_CONFIG_FILE are respected),
`workspace` (synth into cdktf.out and the per-stack directories, with a seam for tests), `files` (0600 files, umask
077), `backup` (state pull, timestamped backup, verification, restore), `summary` (per-node view of a plan).
"""

from terravixens.operations.outcome import ExitCode, OperationError

__all__ = ["ExitCode", "OperationError"]
