"""A running cluster for `terravixens check` and the Talos side of `drift`: the Talos side is tests/fake_talosctl.py
on a scenario that says what the site says (every node on the site's version and schematic, the control planes etcd
members), the Kubernetes side a real kube-apiserver (tests/control_plane.py, given as `kube`) holding the objects
their writers would leave (tests/kube_objects.py: every site node a Ready Node with its role and labels, Cilium rolled
out, the site's pools and L2 policy, Flux Ready), read by the real kubectl through a wrapper that records its calls —
or, without `kube`, tests/fake_kubectl.py on a scenario (kept for the faults a real server cannot produce on demand:
a kubectl whose child holds its pipes). A talosconfig and a kubeconfig whose client certificates are real X.509
certificates (the kubeconfig's issued by the real API server's CA) — then each test breaks one thing.

Only loopback is talked to: the Talos addresses are only what the fake prints.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.x509.oid import NameOID

from terravixens.config.model import Site
from terravixens.operations.acceptance import CheckOptions
from terravixens.operations.kube import Kubectl
from terravixens.operations.observe import SiteNode, site_nodes
from terravixens.roles import Role
from terravixens.talosctl import Talosctl
from tests import kube_objects as k
from tests.control_plane import ControlPlane, free_port, recorded_calls

ROOT = Path(__file__).resolve().parent.parent
TALOSCTL = ROOT / "tests" / "fake_talosctl.py"
KUBECTL = ROOT / "tests" / "fake_kubectl.py"


def certificate_pem(days: float, *, ed25519_key: bool = True, organization: str = "os:admin") -> str:
    """A self-signed client certificate valid until `days` from now (negative: expired), from two days before."""
    now = datetime.now(UTC)
    key: Any = ed25519.Ed25519PrivateKey.generate() if ed25519_key else ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now + timedelta(days=min(days, 0) - 2))
        .not_valid_after(now + timedelta(days=days))
    )
    signed = builder.sign(key, None if ed25519_key else hashes.SHA256())
    return signed.public_bytes(serialization.Encoding.PEM).decode()


def talosconfig_text(cluster: str, endpoints: list[str], days: float) -> str:
    """A talosconfig as `talosctl config` writes it: contexts.<name>.{endpoints, nodes, ca, crt, key}, base64 PEM."""
    crt = base64.b64encode(certificate_pem(days).encode()).decode()
    return yaml.safe_dump(
        {
            "context": cluster,
            "contexts": {
                cluster: {
                    "endpoints": endpoints,
                    "nodes": endpoints[:1],
                    "ca": base64.b64encode(certificate_pem(3650).encode()).decode(),
                    "crt": crt,
                    "key": base64.b64encode(b"-----BEGIN ED25519 PRIVATE KEY-----\nnot a key\n").decode(),
                }
            },
        }
    )


def kubeconfig_text(cluster: str, server: str, days: float) -> str:
    """An admin kubeconfig as Talos issues it (client-certificate-data: base64 PEM, an ECDSA key)."""
    user = f"admin@{cluster}"
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": cluster, "cluster": {"server": server, "certificate-authority-data": "Cg=="}}],
            "contexts": [{"name": user, "context": {"cluster": cluster, "namespace": "default", "user": user}}],
            "current-context": user,
            "users": [
                {
                    "name": user,
                    "user": {
                        "client-certificate-data": base64.b64encode(
                            certificate_pem(days, ed25519_key=False).encode()
                        ).decode(),
                        "client-key-data": "Cg==",
                    },
                }
            ],
        }
    )


def member_id(address: str) -> str:
    import hashlib

    return hashlib.sha256(f"member {address}".encode()).hexdigest()[:16]


class Cluster:
    """The fake talosctl and kubectl of one test (wrappers in `folder/bin`), answering as a cluster that is exactly
    what the site says, and the talosconfig/kubeconfig files to give them."""

    def __init__(
        self,
        folder: Path,
        site: Site,
        cluster: str = "prod",
        *,
        certificate_days: float = 365,
        kube: ControlPlane | None = None,
    ):
        self.folder, self.site, self.cluster, self.server = folder, site, cluster, kube
        self.nodes: list[SiteNode] = site_nodes(site, cluster)
        spec = site.clusters[cluster]
        control_planes = [n for n in self.nodes if n.role is Role.CONTROLPLANE]
        self.talos_scenario = folder / "talosctl-scenario.json"
        self.kube_scenario = folder / "kubectl-scenario.json"
        self.talos_scenario.write_text(
            json.dumps(
                {
                    "versions": {n.address: spec.talos_version for n in self.nodes},
                    "schematics": {n.address: n.schematic for n in self.nodes},
                    "members": [
                        {"id": member_id(n.address), "hostname": n.hostname, "address": n.address}
                        for n in control_planes
                    ],
                    "logs": {},
                    "node_names": {n.address: n.hostname for n in self.nodes},
                    "calls": [],
                }
            )
        )
        objects: dict[str, list[dict]] = {
            "nodes": [
                k.node(n.hostname, n.address, control_plane=n.role is Role.CONTROLPLANE, labels=n.labels)
                for n in self.nodes
            ],
            "daemonsets.apps": [k.daemonset("cilium", desired=len(self.nodes))],
            "ciliumloadbalancerippools.cilium.io": [
                k.ip_pool(name, [str(c) for c in cidrs], total=32, used=1) for name, cidrs in spec.cilium.pools.items()
            ],
            "ciliuml2announcementpolicies.cilium.io": [k.l2_policy()] if spec.cilium.pools else [],
        }
        if spec.flux is not None:
            objects["gitrepositories.source.toolkit.fluxcd.io"] = [k.git_repository()]
            objects["kustomizations.kustomize.toolkit.fluxcd.io"] = [k.kustomization()]
        bin_dir = folder / "bin"
        bin_dir.mkdir(exist_ok=True)
        self.talosctl_path = bin_dir / "talosctl"
        self.talosctl_path.write_text(f'#!/bin/sh\nexec {sys.executable} {TALOSCTL} {self.talos_scenario} "$@"\n')
        self.kubectl_path = bin_dir / "kubectl"
        if kube is None:
            self.kube_scenario.write_text(json.dumps({"objects": objects, "calls": []}))
            self.kubectl_path.write_text(f'#!/bin/sh\nexec {sys.executable} {KUBECTL} {self.kube_scenario} "$@"\n')
        else:
            baseline = json.dumps(objects, sort_keys=True)
            if not kube.holds(baseline):  # what the site says, unless the last test left exactly that untouched
                kube.reset()
                k.put_all(kube, objects)
                kube.remember(baseline)
            self.kubectl_path = kube.recording_kubectl(bin_dir)
        for path in (self.talosctl_path, self.kubectl_path):
            path.chmod(0o755)
        self.talosconfig = folder / "talosconfig"
        self.kubeconfig = folder / "kubeconfig"
        self.certificates(certificate_days, certificate_days)

    def certificates(self, talos_days: float, kube_days: float) -> None:
        endpoints = [n.address for n in self.nodes if n.role is Role.CONTROLPLANE]
        self.talosconfig.write_text(talosconfig_text(self.cluster, endpoints, talos_days))
        if self.server is None:
            vip = self.site.clusters[self.cluster].endpoint_vip
            self.kubeconfig.write_text(kubeconfig_text(self.cluster, f"https://{vip}:6443", kube_days))
            return
        client = self.server.kube_pki.issue(f"admin-{self.folder.name}", "admin", ["system:masters"], days=kube_days)
        self.server.write_kubeconfig(self.kubeconfig, cluster=self.cluster, client=client)

    # ------------------------------------------------------------------------------------------------ changes
    def _change(self, path: Path, change: Callable[[dict], None]) -> None:
        with open(f"{path}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            state = json.loads(path.read_text())
            change(state)
            written = path.with_name(f"{path.name}.{os.getpid()}")
            written.write_text(json.dumps(state))
            written.replace(path)  # whole or not at all, for a reader without the lock

    def talos(self, change: Callable[[dict], None]) -> None:
        self._change(self.talos_scenario, change)

    def kube(self, change: Callable[[dict], None]) -> None:
        """A change of the fake kubectl's scenario (no real server only)."""
        assert self.server is None, "a real API server is changed through objects/put/remove/unreachable"
        self._change(self.kube_scenario, change)

    def objects(self, resource: str, items: list[dict] | None) -> None:
        """Replaces the objects of a resource type; None: the type is not served (its CRD is not installed)."""
        if self.server is not None:
            kind = k.RESOURCES[resource]
            if items is None:
                self.server.remove_crd(resource)
                return
            for namespace, name in self.server.names(kind):
                self.server.delete(kind, name, namespace)
            for item in items:
                k.put(self.server, item)
            return

        def change(state: dict) -> None:
            if items is None:
                state["objects"].pop(resource, None)
            else:
                state["objects"][resource] = items

        self.kube(change)

    def put(self, resource: str, item: dict) -> None:
        """One object added, or put in place of the one of its name."""
        if self.server is not None:
            kind = k.RESOURCES[resource]
            self.server.delete(kind, item["metadata"]["name"], item["metadata"].get("namespace"))
            k.put(self.server, item)
            return
        name = item["metadata"]["name"]
        self.kube(
            lambda s: s["objects"].update(
                {resource: [o for o in s["objects"][resource] if o["metadata"]["name"] != name] + [item]}
            )
        )

    def remove(self, resource: str, name: str, namespace: str | None = None) -> None:
        if self.server is not None:
            self.server.delete(k.RESOURCES[resource], name, namespace)
            return
        self.kube(
            lambda s: s["objects"].update(
                {resource: [o for o in s["objects"][resource] if o["metadata"]["name"] != name]}
            )
        )

    def unreachable(self) -> str:
        """The API does not answer: a real kubeconfig names a loopback port nothing listens on (kubectl meets a
        refused connection). The server as kubectl names it."""
        if self.server is None:
            self.kube(lambda s: s.update(unreachable=True))
            return f"{self.site.clusters[self.cluster].endpoint_vip}:6443"
        port = free_port()
        self.kubeconfig.write_text(self.kubeconfig.read_text().replace(self.server.server, f"https://127.0.0.1:{port}"))
        return f"127.0.0.1:{port}"

    def address(self, name: str) -> str:
        return next(n.address for n in self.nodes if n.name == name)

    def talos_calls(self) -> list[list[str]]:
        return json.loads(self.talos_scenario.read_text())["calls"]

    def kube_calls(self) -> list[list[str]]:
        """Every kubectl call's arguments (--kubeconfig FILE VERB …), in order."""
        if self.server is None:
            return json.loads(self.kube_scenario.read_text())["calls"]
        return recorded_calls(self.folder / "bin")

    # ------------------------------------------------------------------------------------------------ the tools
    def options(self, **changes: Any) -> CheckOptions:
        settings: dict[str, Any] = {
            "talosconfig": str(self.talosconfig),
            "kubeconfig": str(self.kubeconfig),
            "talosctl": str(self.talosctl_path),
            "timeout": 30,
            **changes,
        }
        return CheckOptions(**settings)

    def kubectl(self) -> Kubectl:
        return Kubectl(str(self.kubectl_path), timeout=30)

    def talosctl(self) -> Talosctl:
        return Talosctl(str(self.talosctl_path), str(self.talosconfig), 30, grace=2)
