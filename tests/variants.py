"""The site variants the conformance, Talos validator and GitOps judge tests synthesize (`VARIANTS`: name -> a change
of the example site's data; `variant_data(change)`: the changed data): the example, node and cluster lifecycle
states, the Talos upgrade path, state on S3, storage and CSI. `conftest.variant_stacks` synthesizes each once."""

from __future__ import annotations

from collections.abc import Callable

from tests import support
from tests.site_builders import cluster, node, with_backup, with_csi, with_storage


def variant_data(change: Callable[[dict], None]) -> dict:
    """The example site's data with `change` applied."""
    data = support.example_data()
    change(data)
    return data


def _five_control_planes(d):
    cluster(d)["control_planes"].update({"cp-d": node(1104, 14), "cp-e": node(1105, 15, "pve1")})


def _single_control_plane(d):
    for name in ("cp-b", "cp-c"):
        del cluster(d)["control_planes"][name]


def _promote(d):
    cluster(d)["workers"]["wk-c"] = node(1203, 23)
    for name in ("wk-a", "wk-b"):
        cluster(d)["control_planes"][name] = cluster(d)["workers"].pop(name)


def _s3(d):
    d["state"] = {
        "backend": "s3",
        "s3": {
            "endpoint": "https://127.0.0.1:9000",
            "bucket": "tfstate",
            "kms_key_id": "arn:aws:kms:us-east-1:000000000000:key/example",
        },
    }


def _routable_and_taints(d):
    worker = cluster(d)["workers"]["wk-a"]
    worker["networks"]["routable"] = {"vlan": 120, "address": "10.12.0.50/24", "gateway": "10.12.0.1"}
    worker["taints"] = [{"key": "dedicated", "value": "gpu", "effect": "NoExecute"}]
    worker["tags"] = ["GPU", "rack-2"]


def _talos(version: str, kubernetes: str, contract: str | None = None):
    def change(d):
        cluster(d).update(talos_version=version, kubernetes_version=kubernetes)
        if contract:
            cluster(d)["config_contract"] = contract

    return change


def _static_macs(d):
    for number, (_, node_entry) in enumerate(sorted({**cluster(d)["control_planes"], **cluster(d)["workers"]}.items())):
        node_entry["mac_address"] = f"02:00:0a:0b:01:{number + 11:02x}"


VARIANTS = {
    "example": lambda d: None,
    "add-worker": lambda d: cluster(d)["workers"].update({"wk-c": node(1203, 23)}),
    "remove-worker": lambda d: cluster(d)["workers"].pop("wk-b"),
    "one-control-plane": _single_control_plane,
    "five-control-planes": _five_control_planes,
    "promoted-workers": _promote,
    "hostname-renamed": lambda d: cluster(d)["workers"]["wk-a"].update(hostname="wk-a-renamed"),
    "talos-bump": lambda d: cluster(d).update(talos_version="v1.11.6"),
    "kubernetes-bump": lambda d: cluster(d).update(kubernetes_version="v1.34.3"),
    "no-flux-no-pools": lambda d: cluster(d).update(flux=None, cilium={}),
    "s3-state": _s3,
    "routable-taints-tags": _routable_and_taints,
    "no-api-user": lambda d: d["hypervisors"]["pve1"].pop("api_user"),
    # The Talos upgrade path (ADR 0023): each state a cluster passes through from 1.11, and a new cluster on 1.13
    # with its newest Kubernetes.
    "talos-1.12-contract-1.11": _talos("v1.12.7", "v1.34.2", "v1.11"),
    "talos-1.13-contract-1.11": _talos("v1.13.0", "v1.34.2", "v1.11"),
    "talos-1.12": _talos("v1.12.7", "v1.35.4"),
    "talos-1.13": _talos("v1.13.0", "v1.36.0"),
    "static-macs": _static_macs,
    # L0 storage of every type, a node on it, and the CSI Secret of the gitops layer (ADR 0044).
    "storage-and-csi": lambda d: with_csi(with_storage(d)),
    # Offsite etcd backups (ADR 0059): the job in the gitops layer, Talos API access on the control planes.
    "etcd-backup": lambda d: with_backup(d, namespace="etcd-backup", prefix="backups/prod"),
}
