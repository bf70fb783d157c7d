"""The plan guard's checks, one module each, in code order. `ALL_CHECKS` is the catalogue docs and tests read."""

from terravixens.guard.checks.base import Check, Violation
from terravixens.guard.checks.bootstrap_once_per_cluster import BootstrapOnlyForNewCluster
from terravixens.guard.checks.cluster_identity_kept import ClusterIdentityKept
from terravixens.guard.checks.control_plane_remains import ControlPlaneRemains
from terravixens.guard.checks.hypervisor_keeps_used import HypervisorKeepsWhatNodesUse
from terravixens.guard.checks.one_control_plane_leaves import OneControlPlaneLeavesPerApply
from terravixens.guard.checks.protected_storage_kept import ProtectedStorageKept
from terravixens.guard.checks.secrets_match_nodes import SecretsMatchRunningNodes
from terravixens.guard.checks.staged_stays_staged import NoSilentReboot
from terravixens.guard.checks.staying_node_kept import StayingNodeKept
from terravixens.guard.checks.storage_kept_while_used import StorageKeptWhileUsed

ALL_CHECKS: tuple[Check, ...] = (
    StayingNodeKept(),
    OneControlPlaneLeavesPerApply(),
    ControlPlaneRemains(),
    ClusterIdentityKept(),
    SecretsMatchRunningNodes(),
    BootstrapOnlyForNewCluster(),
    NoSilentReboot(),
    HypervisorKeepsWhatNodesUse(),
    ProtectedStorageKept(),
    StorageKeptWhileUsed(),
)

__all__ = ["ALL_CHECKS", "Check", "Violation"]
