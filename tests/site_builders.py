"""Site builders the tests share: edits of the example site's data (`support.example_data()`), each returning or
changing the dict a site file parses from. Scenario, conformance, storage and judge tests build their sites here."""

from __future__ import annotations

PASSWORD = "Sw0rdfish-not-in-json"
FINGERPRINT = ":".join(["ab"] * 32)


def node(vm_id: int, octet: int, hypervisor: str = "pve2", **extra) -> dict:
    """A node entry of the example cluster: its VM id, its address 10.11.1.<octet> and maintenance IP."""
    return {
        "hypervisor": hypervisor,
        "vm_id": vm_id,
        **extra,
        "networks": {
            "maintenance_ip": f"10.0.0.{octet}",
            "vlans": {111: {"address": f"10.11.1.{octet}/24", "gateway": "10.11.1.1"}},
        },
    }


def cluster(data: dict) -> dict:
    """The example's cluster `prod`."""
    return data["clusters"]["prod"]


def with_storage(data: dict) -> dict:
    """The example with one storage of each type on pve1 and wk-a's disk on the ZFS pool."""
    data["hypervisors"]["pve1"]["storage"] = {
        "tank": {"type": "zfspool", "pool": "tank/vmdata"},
        "nas": {"type": "nfs", "server": "nas.lab.internal", "export": "/srv/vm", "content": ["images", "backup"]},
        "share": {"type": "cifs", "server": "nas.lab.internal", "share": "vms", "username": "pve"},
        "backups": {
            "type": "pbs",
            "server": "pbs.lab.internal",
            "datastore": "main",
            "username": "backup@pbs!pve",
            "fingerprint": FINGERPRINT.upper(),
        },
    }
    cluster(data)["workers"]["wk-a"]["storage"] = "tank"
    return data


def with_csi(data: dict) -> dict:
    """The example with the CSI driver's Secret in the gitops layer (ADR 0044)."""
    cluster(data)["csi"] = {"name": "smb-creds", "namespace": "csi-smb"}
    return data


BACKUP_RECIPIENT = "age18s09wxxa0zt9wn0fsjlfxcrpxrs99f2am97tdczyellgc4esv3dqwhd6xa"
BACKUP_BUCKET = "etcd-backups"


def with_backup(data: dict, **changes) -> dict:
    """The example cluster with offsite etcd backups (ADR 0059)."""
    cluster(data)["etcd_backup"] = {
        "schedule": "0 */6 * * *",
        "endpoint": "https://minio.lab.internal:9000",
        "bucket": BACKUP_BUCKET,
        "age_recipient": BACKUP_RECIPIENT,
        **changes,
    }
    return data
