"""The one catalogue of Terraform resource types terravixens reasons about, shared by the synth-time rules
(terravixens.rules) and the plan guard (terravixens.guard).

Pure (no cdktf import): the guard and the CLI read it without starting jsii. A type added here is seen by every
rule and every guard check at once; before, each kept its own copy and they drifted.

bpg/proxmox 0.111 ships most resources under two or more names (the SDK `proxmox_virtual_environment_*` ones, the
framework `proxmox_*` ones, and clones): every name counts.
"""

from __future__ import annotations

# ------------------------------------------------------------------------------------------------------- Talos
NODE_APPLY = "talos_machine_configuration_apply"
# siderolabs/talos 0.12 replaces the apply with `talos_machine` (whose `node` forces replacement): never emitted,
# but a plan or a construct holding one is judged like an apply.
TALOS_MACHINE = "talos_machine"
MACHINE_SECRETS = "talos_machine_secrets"
BOOTSTRAP = "talos_machine_bootstrap"

# ------------------------------------------------------------------------------------------------------- Proxmox
NODE_VM = "proxmox_virtual_environment_vm"  # a TalosNode's VM (also the type of a standalone node's)
VMS = frozenset(
    {
        NODE_VM,
        "proxmox_virtual_environment_vm2",
        "proxmox_vm",
        "proxmox_cloned_vm",
        "proxmox_virtual_environment_cloned_vm",
    }
)
CONTAINERS = frozenset({"proxmox_virtual_environment_container"})
BRIDGES = frozenset({"proxmox_network_linux_bridge", "proxmox_virtual_environment_network_linux_bridge"})
IMAGES = frozenset({"proxmox_download_file", "proxmox_virtual_environment_download_file"})
# The automation identity the platform stacks' Proxmox provider can run as.
API_ACCESS = frozenset(
    {
        "proxmox_virtual_environment_user",
        "proxmox_user_token",
        "proxmox_virtual_environment_user_token",
        "proxmox_virtual_environment_role",
        "proxmox_acl",
        "proxmox_virtual_environment_acl",
    }
)
_STORAGE_KINDS = ("nfs", "cifs", "pbs", "directory", "lvm", "lvmthin", "zfspool")
STORAGES = frozenset(
    {
        *(f"proxmox_storage_{kind}" for kind in _STORAGE_KINDS),
        *(f"proxmox_virtual_environment_storage_{kind}" for kind in _STORAGE_KINDS),
    }
)
BUCKETS = frozenset({"aws_s3_bucket", "minio_s3_bucket"})

# ------------------------------------------------------------------------------------------------------- groups
# Destroying (or replacing) one resets or deletes a machine: it must belong to exactly one node (rule TV002).
RESET_CAPABLE = frozenset({NODE_APPLY, TALOS_MACHINE, *VMS, *CONTAINERS})
# What a destroy would lose for good: buckets, the cluster's certificates, and the storage definitions every disk on
# them is reached through (rule TV005 puts prevent_destroy on each; guard PG004/PG009/PG010).
PROTECTED = frozenset({MACHINE_SECRETS, *BUCKETS, *STORAGES})
# What holds data itself: never deleted (PG009). A Proxmox storage definition only points at data (Proxmox deletes
# the definition, not the pool or the share's files): PG010 refuses deleting one that a node still uses.
PROTECTED_STORAGE = PROTECTED - {MACHINE_SECRETS} - STORAGES

# terravixens' record of which node holds which role (a built-in resource: every plan carries it).
MEMBERSHIP_TYPE = "terraform_data"
MEMBERSHIP_NAME = "cluster_membership"

# ---------------------------------------------------------------------------------------------------- variables
# The Terraform variables that carry credentials into a deploy (TF_VAR_<name>, set by terravixens.standalone's
# *_credentials from the secrets file). Here, not there, so that a stack declaring one imports no validation model.
FLUX_CREDENTIALS_VARIABLE = "flux_git_credentials"
CSI_VARIABLE = "csi_credentials"
BACKUP_VARIABLE = "etcd_backup_credentials"
# What talos-backup reads (the AWS SDK's environment): the Secret's keys, the CronJob's env.
BACKUP_SECRET_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
