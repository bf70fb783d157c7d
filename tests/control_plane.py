"""A real Kubernetes control plane for the day-2 tests (docs/adr/0058-real-control-plane-in-tests.md): etcd members
and a kube-apiserver built by `make tools` (tools/etcd, tools/kube), on loopback, with the Flux and Cilium CRDs read
from the Go module cache at the versions tools/crds/go.mod pins.

- `Pki`: a CA and the certificates issued from it (cryptography, a test dependency). Like Talos, etcd has its own CA
  (peer, server and client certificates) and Kubernetes its own (the API server's serving certificate and the admin
  client certificate: `CN=admin, O=system:masters`, what Talos' admin kubeconfig carries).
- `EtcdCluster`: members on loopback (free ports), TLS between members and for clients, client certificates
  required. A member is stopped for real (`stop`), frozen (`pause`) or added as a learner (`join`); `machined` asks a
  member what Talos' machined asks it (tools/etcd/machined).
- `ControlPlane`: a three-member etcd cluster and a kube-apiserver on it (client certificates and a token file, RBAC),
  the CRDs applied by the real kubectl; `api` is a small REST client with the admin certificate for what kubelets,
  Flux and Cilium write (objects and their status, through the status subresource).

Every process is started with PR_SET_PDEATHSIG (it dies with the test process, even one killed by SIGKILL), in its
own session (a Ctrl-C reaches the tests, which stop it in order), and stopped by PID (`stop`: SIGCONT, SIGTERM, then
SIGKILL after a grace). `STARTED` lists every process started in this test process; `leftovers()` names any still
running, and the session's end fails on one (tests/conftest.py).
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime
import http.client
import ipaddress
import json
import os
import shutil
import signal
import ssl
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.loopback import free_port

ROOT = Path(__file__).resolve().parent.parent
KUBE_BIN = ROOT / "tools" / "kube" / "bin"
ETCD_BIN = ROOT / "tools" / "etcd" / "bin"
APISERVER, KUBECTL = KUBE_BIN / "kube-apiserver", KUBE_BIN / "kubectl"
ETCD, ETCDUTL, MACHINED = ETCD_BIN / "etcd", ETCD_BIN / "etcdutl", ETCD_BIN / "machined"
CRD_MODULES = ROOT / "tools" / "crds" / "bin" / "modules.json"
# The CRDs the checks and the gitops layer use, in their modules (module path, file under the module's folder).
CRDS = (
    ("github.com/fluxcd/source-controller", "config/crd/bases/source.toolkit.fluxcd.io_gitrepositories.yaml"),
    ("github.com/fluxcd/kustomize-controller", "config/crd/bases/kustomize.toolkit.fluxcd.io_kustomizations.yaml"),
    ("github.com/cilium/cilium", "pkg/k8s/apis/cilium.io/client/crds/v2/ciliumloadbalancerippools.yaml"),
    ("github.com/cilium/cilium", "pkg/k8s/apis/cilium.io/client/crds/v2alpha1/ciliuml2announcementpolicies.yaml"),
)
START_TIMEOUT = 60.0
# Every process started by this test process: (pid, what), for the check that none is left running.
STARTED: list[tuple[int, str]] = []
# The folders the processes run in: a process whose command line names one of them is ours.
FOLDERS: list[Path] = []


class ToolMissing(RuntimeError):
    pass


def binary(path: Path) -> Path:
    if not path.exists():
        raise ToolMissing(f"{path} is missing: run `make tools` (builds it from the Go module proxy)")
    return path


def crd_files() -> list[Path]:
    """The CRD files in the module cache, at the versions tools/crds/go.mod pins (`make tools` downloads them)."""
    if not CRD_MODULES.exists():
        raise ToolMissing(f"{CRD_MODULES} is missing: run `make tools` (downloads the CRD modules)")
    text, decoder, position, folders = CRD_MODULES.read_text(), json.JSONDecoder(), 0, {}
    while position < len(text.rstrip()):
        module, position = decoder.raw_decode(text, position)
        while position < len(text) and text[position].isspace():
            position += 1
        folders[module["Path"]] = Path(module["Dir"])
    return [folders[module] / path for module, path in CRDS]


def crd_versions() -> dict[str, str]:
    """Module -> the version tools/crds/go.mod pins."""
    found = {}
    for line in (ROOT / "tools" / "crds" / "go.mod").read_text().splitlines():
        words = line.split()
        if len(words) == 2 and words[1].startswith("v") and "/" in words[0]:
            found[words[0]] = words[1]
    return found


# ----------------------------------------------------------------------------------------------------- processes
def _die_with_parent(parent: int) -> None:
    """In the child, before exec: SIGKILL when the test process ends, whatever ends it (PR_SET_PDEATHSIG = 1)."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before prctl: nobody is left to stop this one
        os._exit(1)


def start(argv: Sequence[str], log: Path, what: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    """A supervised process: dies with this process, its own session, output to `log`, recorded in STARTED.
    Started from the calling thread: PR_SET_PDEATHSIG follows the thread that forked, so never from a pool."""
    parent = os.getpid()
    with open(log, "ab") as output:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=lambda: _die_with_parent(parent),
            env=env,
        )
    STARTED.append((process.pid, what))
    return process


def stop(process: subprocess.Popen | None, grace: float = 10.0) -> None:
    """Ends one process by its PID: SIGCONT (it may be frozen), SIGTERM, then SIGKILL after `grace`; waited for."""
    if process is None or process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(process.pid, signal.SIGCONT)
        process.terminate()
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        process.wait(grace)


def running(pid: int) -> bool:
    try:
        return "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False


def leftovers() -> list[str]:
    """Processes this test process started that still run, and any process whose command line names one of its
    folders (a process started some other way from them): 'pid what'."""
    found = {pid: what for pid, what in STARTED if running(pid)}
    markers = [str(folder) for folder in FOLDERS]
    if markers:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            with contextlib.suppress(OSError):
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                if any(marker in command for marker in markers) and running(int(entry.name)):
                    found.setdefault(int(entry.name), command[:120])
    return [f"{pid} {what}" for pid, what in sorted(found.items())]


def tail(path: Path, lines: int = 15) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return ""


def _wait(ready, what: str, timeout: float, log: Path, process: subprocess.Popen | None = None) -> None:
    until = time.monotonic() + timeout
    while True:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"{what} exited ({process.returncode}) before it was ready:\n{tail(log)}")
        with contextlib.suppress(OSError, ssl.SSLError, http.client.HTTPException, ValueError):
            if ready():
                return
        if time.monotonic() > until:
            raise RuntimeError(f"{what} not ready within {timeout:.0f}s:\n{tail(log)}")
        time.sleep(0.1)


# ----------------------------------------------------------------------------------------------------- certificates
@dataclass(frozen=True)
class Issued:
    cert: Path
    key: Path

    @property
    def cert_pem(self) -> str:
        return self.cert.read_text()

    @property
    def key_pem(self) -> str:
        return self.key.read_text()


class Pki:
    """A CA (ECDSA P-256, as Talos makes its CAs) and what it issues, in `folder` (0700; keys 0600)."""

    def __init__(self, folder: Path, name: str):
        self.folder = folder
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
            .sign(self.key, hashes.SHA256())
        )
        self.path = folder / f"{name}-ca.crt"
        self.path.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    @property
    def pem(self) -> str:
        return self.path.read_text()

    def issue(
        self,
        file: str,
        common_name: str,
        organizations: Sequence[str] = (),
        *,
        ips: Sequence[str] = (),
        dns: Sequence[str] = (),
        server: bool = False,
        client: bool = True,
        days: float = 365,
    ) -> Issued:
        """A certificate valid from two days ago until `days` from now (negative: already expired)."""
        key = ec.generate_private_key(ec.SECP256R1())
        names = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
        names.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
        now = datetime.datetime.now(datetime.UTC)
        usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server else []) + (
            [ExtendedKeyUsageOID.CLIENT_AUTH] if client else []
        )
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(names))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now + datetime.timedelta(days=min(days, 0) - 2))
            .not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        )
        alternatives: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
        alternatives += [x509.DNSName(name) for name in dns]
        if alternatives:
            builder = builder.add_extension(x509.SubjectAlternativeName(alternatives), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        issued = Issued(self.folder / f"{file}.crt", self.folder / f"{file}.key")
        issued.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        descriptor = os.open(issued.key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "wb") as target:
            target.write(
                key.private_bytes(
                    serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
                )
            )
        return issued


def _https(ca: Path, client: Issued | None, host: str, port: int, timeout: float) -> http.client.HTTPSConnection:
    context = ssl.create_default_context(cafile=str(ca))
    if client is not None:
        context.load_cert_chain(str(client.cert), str(client.key))
    return http.client.HTTPSConnection(host, port, timeout=timeout, context=context)


# ---------------------------------------------------------------------------------------------------------- etcd
@dataclass
class EtcdMember:
    name: str
    host: str
    client_port: int
    peer_port: int
    data_dir: Path
    log: Path
    process: subprocess.Popen | None = None

    @property
    def client_url(self) -> str:
        return f"https://{self.host}:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"https://{self.host}:{self.peer_port}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


class EtcdCluster:
    """etcd members named after the control planes' hostnames (Talos names each member after its node), on loopback:
    `hosts` maps a name to the loopback address it listens on (127.0.0.1 unless given), `nodes` to the address of
    the node it stands for (the address talosctl is given; default: its host).

    `described` (folder/etcd.json) says, after every change, which member runs on which node, its URLs, whether its
    process runs, and the client's TLS files and tools: tests/fake_talosctl.py answers `etcd members`, `status`,
    `remove-member` and `snapshot` from the real members through it (scenario key `etcd`)."""

    def __init__(
        self,
        folder: Path,
        names: Sequence[str],
        hosts: dict[str, str] | None = None,
        pki: Pki | None = None,
        nodes: dict[str, str] | None = None,
    ):
        self.folder = folder
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        FOLDERS.append(folder)
        self.pki = pki or Pki(folder / "pki", "etcd")
        self.hosts = dict(hosts or {})
        self.nodes = dict(nodes or {})
        self.described = folder / "etcd.json"
        self.token = f"terravixens-{os.getpid()}-{int(time.time() * 1000) % 100000}"
        self.members: dict[str, EtcdMember] = {}
        hosts_used = sorted({self.hosts.get(name, "127.0.0.1") for name in names})
        self.client = self.pki.issue("etcd-client", "talos-machined", ips=hosts_used)
        for name in names:
            self._member(name)

    def describe(self) -> Path:
        """folder/etcd.json, written whole (renamed into place): what tests/fake_talosctl.py reads."""
        document = {
            "machined": str(binary(MACHINED)),
            "etcdutl": str(binary(ETCDUTL)),
            "cacert": str(self.pki.path),
            "cert": str(self.client.cert),
            "key": str(self.client.key),
            "members": {
                name: {
                    "node": self.nodes.get(name, member.host),
                    "client_url": member.client_url,
                    "peer_url": member.peer_url,
                    "running": member.running,
                    "pid": member.process.pid if member.process else None,
                    "data_dir": str(member.data_dir),
                }
                for name, member in self.members.items()
            },
        }
        written = self.described.with_suffix(".json.tmp")
        written.write_text(json.dumps(document))
        written.replace(self.described)
        return self.described

    def _member(self, name: str) -> EtcdMember:
        host = self.hosts.get(name, "127.0.0.1")
        member = EtcdMember(
            name, host, free_port(host), free_port(host), self.folder / f"{name}.etcd", self.folder / f"{name}.log"
        )
        self.pki.issue(f"{name}-server", name, ips=[host, "127.0.0.1"], dns=["localhost", name], server=True)
        self.pki.issue(f"{name}-peer", name, ips=[host], dns=[name], server=True, client=True)
        self.members[name] = member
        return member

    def _argv(self, member: EtcdMember, initial: dict[str, str], state: str) -> list[str]:
        pki = self.pki.folder
        return [
            str(binary(ETCD)),
            f"--name={member.name}",
            f"--data-dir={member.data_dir}",
            f"--listen-client-urls={member.client_url}",
            f"--advertise-client-urls={member.client_url}",
            f"--listen-peer-urls={member.peer_url}",
            f"--initial-advertise-peer-urls={member.peer_url}",
            "--initial-cluster=" + ",".join(f"{name}={url}" for name, url in initial.items()),
            f"--initial-cluster-state={state}",
            f"--initial-cluster-token={self.token}",
            f"--trusted-ca-file={self.pki.path}",
            f"--cert-file={pki / f'{member.name}-server.crt'}",
            f"--key-file={pki / f'{member.name}-server.key'}",
            "--client-cert-auth",
            f"--peer-trusted-ca-file={self.pki.path}",
            f"--peer-cert-file={pki / f'{member.name}-peer.crt'}",
            f"--peer-key-file={pki / f'{member.name}-peer.key'}",
            "--peer-client-cert-auth",
            "--listen-metrics-urls=",
            "--log-level=warn",
        ]

    def start(self, timeout: float = START_TIMEOUT) -> EtcdCluster:
        """Every member started (a new cluster), then each one's /health asked until all say true."""
        self.launch()
        return self.wait(timeout)

    def launch(self) -> None:
        """Every member started at once (a new cluster elects its leader once they meet), not waited for."""
        initial = {m.name: m.peer_url for m in self.members.values()}
        for member in self.members.values():
            member.process = start(self._argv(member, initial, "new"), member.log, f"etcd {member.name}")

    def wait(self, timeout: float = START_TIMEOUT) -> EtcdCluster:
        for member in self.members.values():
            self.wait_healthy(member, timeout)
        self.describe()
        return self

    def health(self, member: EtcdMember, timeout: float = 2) -> bool:
        connection = _https(self.pki.path, self.client, member.host, member.client_port, timeout)
        try:
            connection.request("GET", "/health")
            return json.loads(connection.getresponse().read()).get("health") == "true"
        finally:
            connection.close()

    def wait_healthy(self, member: EtcdMember, timeout: float = START_TIMEOUT) -> None:
        _wait(lambda: self.health(member), f"etcd member {member.name}", timeout, member.log, member.process)

    # ----------------------------------------------------------------------------- what happens to a member
    def stop(self, name: str) -> None:
        """The member's process ended (a node that died, or was reset): its data stays where it was."""
        member = self.members[name]
        stop(member.process)
        self.describe()

    def pause(self, name: str) -> None:
        """Frozen (SIGSTOP): it holds its ports and answers nothing."""
        os.kill(self.members[name].process.pid, signal.SIGSTOP)  # type: ignore[union-attr]

    def resume(self, name: str) -> None:
        os.kill(self.members[name].process.pid, signal.SIGCONT)  # type: ignore[union-attr]

    def join(self, name: str, host: str | None = None, learner_promoted: bool = True, node: str | None = None) -> str:
        """A new control plane joins as Talos joins it: added as a learner through the running members, started with
        the cluster as it is, then promoted once it has caught up (unless `learner_promoted` is False). Its id."""
        if host is not None:
            self.hosts[name] = host
        if node is not None:
            self.nodes[name] = node
        member = self._member(name)
        until = time.monotonic() + START_TIMEOUT
        while True:  # etcd adds a member only once its leader has heard from every voter lately; Talos retries too
            try:
                added = self.machined("add-learner", member.peer_url)
                break
            except RuntimeError as refused:
                if time.monotonic() > until or "unhealthy cluster" not in str(refused):
                    raise
                time.sleep(0.5)
        initial = {m["name"] or name: m["peer_urls"][0] for m in added["members"]}
        member.process = start(self._argv(member, initial, "existing"), member.log, f"etcd {member.name}")
        self.wait_healthy(member)
        if learner_promoted:
            until = time.monotonic() + START_TIMEOUT
            while True:  # a learner is promoted once its log has caught up with the leader's
                try:
                    self.machined("promote", added["id"])
                    break
                except RuntimeError as refused:
                    if time.monotonic() > until or "not in sync" not in str(refused):
                        raise
                    time.sleep(0.2)
        self.describe()
        return str(added["id"])

    def restart(self, name: str) -> None:
        """A stopped member started again on its own data (a node that comes back)."""
        member = self.members[name]
        initial = {m.name: m.peer_url for m in self.members.values()}
        member.process = start(self._argv(member, initial, "existing"), member.log, f"etcd {name}")
        self.describe()

    def restore(self, snapshot: Path, name: str, skip_hash_check: bool = False) -> subprocess.CompletedProcess:
        """What Talos' etcd service does with `bootstrap --recover-from`: `etcdutl snapshot restore` of the file into
        the member's (wiped) data directory as a one-member cluster, then the member started from it. etcdutl's
        answer (a refused file: a non-zero exit, nothing started)."""
        member = self.members.get(name) or self._member(name)
        stop(member.process)
        shutil.rmtree(member.data_dir, ignore_errors=True)
        restored = subprocess.run(
            [
                str(binary(ETCDUTL)),
                "snapshot",
                "restore",
                str(snapshot),
                f"--data-dir={member.data_dir}",
                f"--name={name}",
                f"--initial-cluster={name}={member.peer_url}",
                f"--initial-advertise-peer-urls={member.peer_url}",
                f"--initial-cluster-token={self.token}",
                *(["--skip-hash-check"] if skip_hash_check else []),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if restored.returncode == 0:
            member.process = start(self._argv(member, {name: member.peer_url}, "new"), member.log, f"etcd {name}")
            self.wait_healthy(member)
        self.describe()
        return restored

    def leave(self, name: str) -> None:
        """What a graceful reset does to a control plane: it leaves etcd (EtcdLeaveCluster), then its etcd stops and
        its data is wiped."""
        self.machined("leave", name, through=[m for m in self.members if m != name])
        self.stop(name)
        shutil.rmtree(self.members[name].data_dir, ignore_errors=True)
        del self.members[name]
        self.describe()

    # ---------------------------------------------------------------------------------------- asking etcd
    def machined_argv(self, endpoints: Sequence[str], *call: str, timeout: float = 5) -> list[str]:
        return [
            str(binary(MACHINED)),
            f"-endpoints={','.join(endpoints)}",
            f"-cacert={self.pki.path}",
            f"-cert={self.client.cert}",
            f"-key={self.client.key}",
            f"-timeout={timeout}s",
            *call,
        ]

    def machined(self, *call: str, through: Sequence[str] | None = None, timeout: float = 5) -> dict[str, Any]:
        """A call of tools/etcd/machined through `through` (member names; default: every running member); its JSON
        answer, or RuntimeError with etcd's error."""
        names = [n for n in (through or list(self.members)) if self.members[n].running]
        endpoints = [self.members[n].client_url for n in names]
        done = subprocess.run(
            self.machined_argv(endpoints, *call, timeout=timeout), capture_output=True, text=True, timeout=timeout + 30
        )
        answer = json.loads(done.stdout or "{}")
        if done.returncode != 0:
            raise RuntimeError(f"machined {' '.join(call)}: {answer.get('code')}: {answer.get('error') or done.stderr}")
        return answer

    def member_list(self, through: str | None = None) -> list[dict[str, Any]]:
        return list(self.machined("members", through=[through] if through else None)["members"])

    def close(self) -> None:
        """Every member stopped (frozen ones too)."""
        for member in self.members.values():
            stop(member.process)


# ------------------------------------------------------------------------------------------------- API server
KINDS: dict[str, tuple[str, str, bool]] = {
    # kind -> (API path prefix, plural, namespaced)
    "Namespace": ("/api/v1", "namespaces", False),
    "Node": ("/api/v1", "nodes", False),
    "Secret": ("/api/v1", "secrets", True),
    "DaemonSet": ("/apis/apps/v1", "daemonsets", True),
    "ClusterRole": ("/apis/rbac.authorization.k8s.io/v1", "clusterroles", False),
    "ClusterRoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    "CustomResourceDefinition": ("/apis/apiextensions.k8s.io/v1", "customresourcedefinitions", False),
    "CiliumLoadBalancerIPPool": ("/apis/cilium.io/v2alpha1", "ciliumloadbalancerippools", False),
    "CiliumL2AnnouncementPolicy": ("/apis/cilium.io/v2alpha1", "ciliuml2announcementpolicies", False),
    "GitRepository": ("/apis/source.toolkit.fluxcd.io/v1", "gitrepositories", True),
    "Kustomization": ("/apis/kustomize.toolkit.fluxcd.io/v1", "kustomizations", True),
}
# What a test may leave behind, emptied before the next one (plural of a KINDS entry).
RESET = (
    "Node",
    "DaemonSet",
    "CiliumLoadBalancerIPPool",
    "CiliumL2AnnouncementPolicy",
    "GitRepository",
    "Kustomization",
)
OBSERVER = "observer"  # a token user that may read Nodes, DaemonSets and Cilium's objects, not Flux's
FIELD_MANAGER = "terravixens-tests"
RECORDING_KUBECTL = """#!/bin/sh
{{ for argument in "$@"; do printf '%s\\037' "$argument"; done; printf '\\n'; }} >> {log}
[ "$1" = --kubeconfig ] && stat -c '%a %n' "$2" >> {log}.modes
KUBECACHEDIR={cache} exec {kubectl} "$@"
"""


def recorded_calls(folder: Path) -> list[list[str]]:
    """The arguments of every call of a `recording_kubectl` in `folder`, in order."""
    log = folder / "kubectl-calls"
    return [line.split("\x1f")[:-1] for line in log.read_text().splitlines()] if log.exists() else []


class ApiError(RuntimeError):
    def __init__(self, status: int, body: Any):
        self.status, self.body = status, body
        message = body.get("message") if isinstance(body, dict) else str(body)[:300]
        super().__init__(f"{status}: {message}")


@dataclass
class ControlPlane:
    """etcd (three members) and kube-apiserver on loopback; see the module's docstring."""

    folder: Path
    etcd: EtcdCluster | None = None
    process: subprocess.Popen | None = None
    port: int = 0
    started_in: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)  # seconds each start-up phase took
    tokens: dict[str, str] = field(default_factory=dict)
    _lock: threading.RLock = field(default_factory=threading.RLock)
    _connection: http.client.HTTPSConnection | None = None
    baseline: tuple[str, Any] | None = None  # (what it stands for, `items()` then): see remember/holds

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.folder / "kube-apiserver.log"

    def start(self) -> ControlPlane:
        began = time.monotonic()
        for tool in (ETCD, APISERVER, KUBECTL, MACHINED):  # what is missing is said before anything starts
            binary(tool)
        crd_files()
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        FOLDERS.append(self.folder)
        self.kube_pki = Pki(self.folder / "pki", "kubernetes")
        self.etcd = EtcdCluster(self.folder / "etcd", ["etcd-a", "etcd-b", "etcd-c"])
        self.etcd.launch()  # the API server starts while they elect: it waits for its storage itself
        self.serving = self.kube_pki.issue(
            "apiserver", "kube-apiserver", ips=["127.0.0.1"], dns=["localhost", "kubernetes"], server=True
        )
        self.admin = self.kube_pki.issue("admin", "admin", ["system:masters"])
        self.apiserver_etcd = self.etcd.pki.issue("apiserver-etcd-client", "kube-apiserver")
        account = ec.generate_private_key(ec.SECP256R1())
        account_key = self.folder / "service-account.key"
        account_key.write_bytes(
            account.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        account_key.chmod(0o600)
        account_public = self.folder / "service-account.pub"
        account_public.write_bytes(
            account.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        self.tokens = {OBSERVER: os.urandom(16).hex()}
        tokens = self.folder / "tokens.csv"
        tokens.write_text("".join(f"{token},{user},{user}-uid\n" for user, token in self.tokens.items()))
        tokens.chmod(0o600)
        self.port = free_port()
        argv = [
            str(binary(APISERVER)),
            "--etcd-servers=" + ",".join(m.client_url for m in self.etcd.members.values()),
            f"--etcd-cafile={self.etcd.pki.path}",
            f"--etcd-certfile={self.apiserver_etcd.cert}",
            f"--etcd-keyfile={self.apiserver_etcd.key}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.port}",
            f"--tls-cert-file={self.serving.cert}",
            f"--tls-private-key-file={self.serving.key}",
            f"--client-ca-file={self.kube_pki.path}",
            f"--token-auth-file={tokens}",
            "--authorization-mode=RBAC",
            f"--service-account-key-file={account_public}",
            f"--service-account-signing-key-file={account_key}",
            "--service-account-issuer=https://kubernetes.default.svc",
            "--service-cluster-ip-range=10.96.0.0/12",
            "--endpoint-reconciler-type=none",
            "--profiling=false",
            f"--cert-dir={self.folder / 'certs'}",
        ]
        self.process = start(argv, self.log, "kube-apiserver")
        self.etcd.wait()
        self.phases["etcd"] = time.monotonic() - began
        _wait(lambda: self.get("/readyz", raw=True) == "ok", "kube-apiserver", START_TIMEOUT, self.log, self.process)
        self.phases["kube-apiserver"] = time.monotonic() - began - self.phases["etcd"]
        self.write_kubeconfig(self.folder / "admin.kubeconfig")
        self._crds()
        self._rbac()
        self.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "flux-system"}})
        self.started_in = time.monotonic() - began
        self.phases["CRDs, RBAC"] = self.started_in - self.phases["etcd"] - self.phases["kube-apiserver"]
        return self

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
        stop(self.process)
        if self.etcd is not None:
            self.etcd.close()

    # ---------------------------------------------------------------------------------------- kubeconfigs
    def kubeconfig_text(self, cluster: str = "prod", *, client: Issued | None = None, token: str | None = None) -> str:
        """A kubeconfig as Talos issues the admin one (context admin@CLUSTER, namespace default, the client
        certificate and key as base64 PEM, the cluster CA), for the admin (default), another certificate, or a
        token."""
        import base64

        def b64(text: str) -> str:
            return base64.b64encode(text.encode()).decode()

        user = f"admin@{cluster}"
        issued = client or self.admin
        credentials = (
            {"token": token}
            if token
            else {"client-certificate-data": b64(issued.cert_pem), "client-key-data": b64(issued.key_pem)}
        )
        return yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": cluster,
                        "cluster": {"server": self.server, "certificate-authority-data": b64(self.kube_pki.pem)},
                    }
                ],
                "contexts": [{"name": user, "context": {"cluster": cluster, "namespace": "default", "user": user}}],
                "current-context": user,
                "users": [{"name": user, "user": credentials}],
            }
        )

    def write_kubeconfig(self, path: Path, **options: Any) -> Path:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as target:
            target.write(self.kubeconfig_text(**options))
        return path

    def kubectl(self, *arguments: str, input: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
        """The real kubectl with the admin kubeconfig."""
        return subprocess.run(
            [str(binary(KUBECTL)), "--kubeconfig", str(self.folder / "admin.kubeconfig"), *arguments],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "KUBECACHEDIR": str(self.folder / "kube-cache")},
        )

    def recording_kubectl(self, folder: Path) -> Path:
        """A `kubectl` in `folder` that appends its arguments to `folder/kubectl-calls` (one line per call, arguments
        separated by US; the mode of the kubeconfig it is given, when it is, to `kubectl-calls.modes`) and execs the
        real kubectl (its process group kept)."""
        path = folder / "kubectl"
        path.write_text(
            RECORDING_KUBECTL.format(
                log=folder / "kubectl-calls", cache=self.folder / "kube-cache", kubectl=binary(KUBECTL)
            )
        )
        path.chmod(0o755)
        return path

    # ----------------------------------------------------------------------------------------------- REST
    def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
        """One call with the admin certificate; a 429 (a new CRD's storage still initialising, API priority and
        fairness) is asked again for up to 30 seconds, as client-go does."""
        until = time.monotonic() + 30
        while True:
            try:
                return self._request(method, path, body, content_type)
            except ApiError as error:
                if error.status != 429 or time.monotonic() > until:
                    raise
                time.sleep(0.2)

    def _request(self, method: str, path: str, body: Any, content_type: str) -> Any:
        """Over one kept-alive connection (a new one when the server closed it)."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = content_type
        with self._lock:
            for attempt in (1, 2):
                if self._connection is None:
                    self._connection = _https(self.kube_pki.path, self.admin, "127.0.0.1", self.port, 30)
                try:
                    self._connection.request(method, path, body=data, headers=headers)
                    response = self._connection.getresponse()
                    raw = response.read().decode()
                    status = response.status
                    break
                except (http.client.HTTPException, OSError):
                    self._connection.close()
                    self._connection = None
                    if attempt == 2:
                        raise
        try:
            parsed: Any = json.loads(raw) if raw else {}
        except ValueError:
            parsed = raw
        if status >= 400:
            raise ApiError(status, parsed)
        return parsed

    def get(self, path: str, raw: bool = False) -> Any:
        if raw:
            connection = _https(self.kube_pki.path, self.admin, "127.0.0.1", self.port, 5)
            try:
                connection.request("GET", path)
                return connection.getresponse().read().decode()
            finally:
                connection.close()
        return self.request("GET", path)

    @staticmethod
    def path(kind: str, name: str | None = None, namespace: str | None = None) -> str:
        prefix, plural, namespaced = KINDS[kind]
        where = f"{prefix}/namespaces/{namespace or 'default'}/{plural}" if namespaced else f"{prefix}/{plural}"
        return f"{where}/{name}" if name else where

    def apply(self, document: dict[str, Any]) -> dict[str, Any]:
        """Server-side apply of one object (no status: a status goes through `status`)."""
        metadata = document["metadata"]
        path = self.path(document["kind"], metadata["name"], metadata.get("namespace"))
        return dict(
            self.request(
                "PATCH",
                f"{path}?fieldManager={FIELD_MANAGER}&force=true",
                document,
                "application/apply-patch+yaml",
            )
        )

    def status(self, document: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
        """The object's status written through its status subresource, as its controller (or kubelet) does."""
        metadata = document["metadata"]
        path = self.path(document["kind"], metadata["name"], metadata.get("namespace"))
        return dict(self.request("PATCH", f"{path}/status", {"status": status}, "application/merge-patch+json"))

    def delete(self, kind: str, name: str, namespace: str | None = None) -> None:
        with contextlib.suppress(ApiError):
            self.request("DELETE", self.path(kind, name, namespace))

    def names(self, kind: str) -> list[tuple[str | None, str]]:
        """(namespace, name) of every object of the kind (all namespaces)."""
        prefix, plural, _ = KINDS[kind]
        items = self.request("GET", f"{prefix}/{plural}").get("items", [])
        return [(i["metadata"].get("namespace"), i["metadata"]["name"]) for i in items]

    def exists(self, kind: str, name: str, namespace: str | None = None) -> bool:
        try:
            self.request("GET", self.path(kind, name, namespace))
        except ApiError as error:
            if error.status == 404:
                return False
            raise
        return True

    # ----------------------------------------------------------------------------------------- CRDs, RBAC
    def crd_documents(self) -> list[dict[str, Any]]:
        return [yaml.safe_load(path.read_text()) for path in crd_files()]

    def _crds(self) -> None:
        """The CRDs applied by the real kubectl (server-side), then waited for until established."""
        arguments = ["apply", "--server-side", "--field-manager=terravixens-tests"]
        for path in crd_files():
            arguments += ["-f", str(path)]
        done = self.kubectl(*arguments)
        if done.returncode != 0:
            raise RuntimeError(f"kubectl apply of the CRDs failed: {done.stderr.strip()}")
        self.wait_established()

    def wait_established(self, timeout: float = START_TIMEOUT) -> None:
        names = [document["metadata"]["name"] for document in self.crd_documents()]

        def established() -> bool:
            for name in names:
                found = self.request("GET", self.path("CustomResourceDefinition", name))
                conditions = {c["type"]: c["status"] for c in found.get("status", {}).get("conditions", [])}
                if conditions.get("Established") != "True":
                    return False
            return True

        _wait(established, "the CRDs", timeout, self.log, self.process)

    def restore_crds(self) -> None:
        """Every CRD there again (a test took one away: a resource type not served)."""
        missing = [
            d for d in self.crd_documents() if not self.exists("CustomResourceDefinition", d["metadata"]["name"])
        ]
        for document in missing:
            document.pop("status", None)
            self.request("POST", self.path("CustomResourceDefinition"), document)
        if missing:
            self.wait_established()

    def remove_crd(self, name: str, timeout: float = START_TIMEOUT) -> None:
        """The CRD deleted and waited for until gone (its objects go with it)."""
        self.delete("CustomResourceDefinition", name)
        _wait(lambda: not self.exists("CustomResourceDefinition", name), f"CRD {name} gone", timeout, self.log)

    def _rbac(self) -> None:
        self.apply(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": "terravixens-observer"},
                "rules": [
                    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]},
                    {"apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": ["get", "list"]},
                    {
                        "apiGroups": ["cilium.io"],
                        "resources": ["ciliumloadbalancerippools", "ciliuml2announcementpolicies"],
                        "verbs": ["get", "list"],
                    },
                ],
            }
        )
        self.apply(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": "terravixens-observer"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "terravixens-observer",
                },
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": OBSERVER}],
            }
        )

    # ------------------------------------------------------------------------------------------ between tests
    def items(self) -> tuple[tuple[str, str | None, str, str], ...] | None:
        """(kind, namespace, name, resourceVersion) of every object of RESET; None when a kind is not served (a
        test took its CRD away). An object's resourceVersion changes with every write of it, whoever writes."""
        found = []
        for kind in RESET:
            prefix, plural, _ = KINDS[kind]
            try:
                listed = self.request("GET", f"{prefix}/{plural}")
            except ApiError as error:
                if error.status == 404:
                    return None
                raise
            for item in listed.get("items", []):
                metadata = item["metadata"]
                found.append((kind, metadata.get("namespace"), metadata["name"], metadata["resourceVersion"]))
        return tuple(sorted(found, key=str))

    def remember(self, key: str) -> None:
        """What the server holds now is the baseline `key` stands for (e.g. a cluster as its site says)."""
        self.baseline = (key, self.items())

    def holds(self, key: str | None = None) -> bool:
        """The server holds the remembered baseline (the one `key` stands for, when given), untouched since: every
        CRD served, the same objects at the same resourceVersions."""
        if self.baseline is None or (key is not None and self.baseline[0] != key):
            return False
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGCONT)
        return self.items() == self.baseline[1]

    def prepare(self) -> None:
        """Before a test: the remembered baseline when the last test left it untouched (a test that reads the
        cluster as its site says changes nothing), else an empty server (`reset`)."""
        if not self.holds():
            self.reset()

    def reset(self) -> None:
        """What a test left: the CRDs back, the objects of RESET gone (namespaces stay: without a controller
        manager, nothing would finish deleting one)."""
        self.baseline = None
        with self._lock:
            if self.process is not None and self.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.process.pid, signal.SIGCONT)
            self.restore_crds()
            for kind in RESET:
                namespaced = KINDS[kind][2]
                for namespace in sorted({ns for ns, _ in self.names(kind)}) if namespaced else [None]:
                    self.request("DELETE", self.path(kind, None, namespace))  # deletecollection

    @contextlib.contextmanager
    def frozen(self) -> Iterator[None]:
        """The API server stopped (SIGSTOP): it holds its port and answers nothing; SIGCONT afterwards, whatever
        happens."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(self.process.pid, signal.SIGCONT)
            _wait(lambda: self.get("/readyz", raw=True) == "ok", "kube-apiserver (resumed)", 30, self.log)


def new_folder(prefix: str) -> Path:
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    folder.chmod(0o700)
    return folder
