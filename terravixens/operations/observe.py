"""What a running cluster says about itself, read and never changed: the observations `terravixens check` judges and
the Talos side of `terravixens drift` compares with the site (docs/adr/0039-acceptance-check-and-talos-drift.md).

Every reading is a value: what was read, or `Unread` (which call, and why not) — never an exception, except an
interrupt, which ends the command as everywhere else. Every call goes through the one bounded runner
(terravixens.talosctl.Talosctl, terravixens.operations.kube.Kubectl); every call here only reads.

Per node, talosctl 1.11–1.13 may answer for some nodes and exit 0 (a WARNING on stderr names the others, research
01): answers are counted per node — a node without its own block or row did not answer, whatever the exit code.

The cluster's talosconfig and kubeconfig are the platform layer's outputs (written 0600 into a 0700 temporary folder
removed afterwards; never printed) unless the operator gives files. A platform layer without a talosconfig output has
no cluster to observe yet: `Access.deployed` is False, which is not an error.

"Since the last apply" (the window of the log check): the newest state backup of the cluster's platform or gitops
layer — terravixens takes one right before every apply, destroy or restore of a layer that has a state, and its name
starts with its UTC time — else no bound (the last `tail` lines of each log).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import re
import ssl
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from terravixens import runner
from terravixens.config.model import Site
from terravixens.config.placement import placed_nodes
from terravixens.etcd_offsite import OffsiteError, RemoteBackup, list_backups
from terravixens.inputs import InputError, read_text
from terravixens.operations.backup import BACKUP_DIR
from terravixens.operations.files import private_directory, write_private
from terravixens.operations.kube import Kubectl
from terravixens.operations.terraform import Terraform
from terravixens.operations.workspace import Workspace
from terravixens.roles import Role
from terravixens.talos.image import schematic_id
from terravixens.talosctl import (
    Member,
    Service,
    Talosctl,
    health_failure,
    log_lines,
    members,
    node_errors,
    schematic,
    services,
    version_tags,
)

JsonObject = dict[str, Any]  # one object of kubectl's JSON

TALOSCONFIG, KUBECONFIG = "talosconfig", "kubeconfig"
CONFIG_LIMIT = 1024 * 1024
# The services whose logs carry a level (research 05): etcd's zap JSON, the kubelet's Kubernetes JSON (Talos sets
# logging.format=json) and machined's controller-runtime zap console. machined, apid and trustd print no level.
LEVELLED_LOGS = ("etcd", "kubelet", "controller-runtime")
ERROR_LEVELS = {"error", "dpanic", "panic", "fatal"}
ANSI = re.compile(r"\x1b\[[0-9;]*m")
KLOG_TEXT = re.compile(r"^([EF])\d{4} \d{2}:\d{2}:\d{2}\.\d+\s+\d+ \S+\] (.*)$")
BACKUP_NAME = re.compile(r"^(\d{8}T\d{6}Z)-serial\d+-")
DEFAULT_TAIL = 300
EXAMPLE_LIMIT = 160


# ----------------------------------------------------------------------------------------------------- values
@dataclass(frozen=True)
class Unread:
    """A reading that could not be made: the call (`talosctl services`, `kubectl get nodes`) and why."""

    call: str
    reason: str

    def __str__(self) -> str:
        return f"{self.call}: {self.reason}"


@dataclass(frozen=True)
class Absent:
    """The API answered that the thing is not there: a resource type without its CRD, or a named object not found
    (kubectl's own line, e.g. `error: the server doesn't have a resource type "gitrepositories"`)."""

    what: str


@dataclass(frozen=True)
class SiteNode:
    """A node as the site has it: its key, the name Talos, etcd and Kubernetes know it by (the hostname), its role,
    the address talosctl reaches it at, its labels and the schematic of its hypervisor's image."""

    name: str
    hostname: str
    role: Role
    address: str
    labels: dict[str, str]
    schematic: str


def site_nodes(site: Site, cluster_name: str) -> list[SiteNode]:
    """Control planes first, then workers, each by name (never by position in the file)."""
    placed = placed_nodes(site, cluster_name)
    return [
        SiteNode(
            node.name,
            node.hostname,
            node.role,
            node.address,
            dict(node.node.labels),
            schematic_id(node.hypervisor.talos_image),
        )
        for role in Role
        for node in placed.values()
        if node.role is role
    ]


def _answered(ran: runner.Ran) -> runner.Ran:
    """A call stopped by a signal ends the command (the runner already ended its process group)."""
    if ran.interrupted:
        raise runner.Interrupted(runner.stopping() or "SIGINT", [ran.argv[0] if ran.argv else "a reading"])
    return ran


# ----------------------------------------------------------------------------------------------------- access
@dataclass(frozen=True)
class Access:
    """Where talosctl and kubectl find the cluster. `talosconfig`/`kubeconfig`: paths (None: none to use, and why in
    `talos_missing`/`kube_missing`); `texts`: their contents, for the certificate check; `deployed`: False when the
    platform layer has no talosconfig output (no cluster yet, or gone): nothing to observe, not an error."""

    talosconfig: str | None
    kubeconfig: Path | None
    talos_missing: str = ""
    kube_missing: str = ""
    texts: dict[str, str] = field(default_factory=dict)
    deployed: bool = True


def layer_output(tf: Terraform, workdir: Path, name: str) -> str | Unread | None:
    """`terraform output -raw NAME` of a layer: its text; None when the layer has no such output (not applied, or
    destroyed); Unread when Terraform could not tell (a backend it cannot reach, a broken state)."""
    result = tf.output(workdir, name)
    if result.returncode == 0 and result.stdout.strip():
        return result.stdout
    if result.returncode == 0 or "not found" in f"{result.stdout}\n{result.stderr}":
        return None
    return Unread(f"terraform output {name}", result.tail() or f"exit {result.returncode}")


def _given(path: str, what: str) -> str | Unread:
    """A file the operator gave: its text (talosctl and kubectl read it too; the certificate check reads it here)."""
    try:
        return read_text(path, limit=CONFIG_LIMIT, what=what)
    except InputError as error:
        return Unread(f"read --{what}", str(error))


@contextlib.contextmanager
def cluster_access(
    ws: Workspace,
    tf: Terraform,
    cluster_name: str,
    talosconfig: str | None = None,
    kubeconfig: str | None = None,
    options: bool = False,
) -> Iterator[Access]:
    """The cluster's talosconfig and kubeconfig: the files given, else the platform layer's outputs (its folder
    initialised first when needed), written 0600 into a 0700 temporary folder removed afterwards. `options`: the
    command takes --talosconfig/--kubeconfig (said when an output is missing)."""
    layer = ws.platform_layer(cluster_name).name
    texts: dict[str, str] = {}
    outputs: dict[str, str | Unread | None] = {}
    if talosconfig is None or kubeconfig is None:
        workdir = ws.stack_dir(layer)
        if not (workdir / ".terraform").exists():
            tf.init(workdir, layer)
        for name, given in ((TALOSCONFIG, talosconfig), (KUBECONFIG, kubeconfig)):
            if given is None:
                outputs[name] = layer_output(tf, workdir, name)
    deployed = talosconfig is not None or isinstance(outputs.get(TALOSCONFIG), str | Unread)
    with private_directory("terravixens-observe-") as folder:
        paths: dict[str, str | None] = {}
        missing: dict[str, str] = {}
        for name, given in ((TALOSCONFIG, talosconfig), (KUBECONFIG, kubeconfig)):
            value = _given(given, name) if given is not None else outputs[name]
            if isinstance(value, str):
                texts[name] = value
                path = given if given is not None else str(write_private(folder / name, value))
                paths[name], missing[name] = path, ""
            elif isinstance(value, Unread):
                paths[name], missing[name] = None, str(value)
            else:
                hint = f"give one with --{name} FILE" if options else "not applied yet, or destroyed"
                paths[name], missing[name] = None, f"{layer} has no {name} output ({hint})"
        yield Access(
            paths[TALOSCONFIG],
            Path(kube) if (kube := paths[KUBECONFIG]) else None,
            missing[TALOSCONFIG],
            missing[KUBECONFIG],
            texts,
            deployed,
        )


# --------------------------------------------------------------------------------------------------- talosctl
@dataclass(frozen=True)
class RunningImage:
    """What a node runs: its Talos version (the server Tag of `talosctl version`) and the schematic id of the image
    it booted (the `schematic` extension of `talosctl get extensions`; None: not an Image Factory image)."""

    version: str
    schematic: str | None


def read_images(talosctl: Talosctl, nodes: Sequence[SiteNode]) -> dict[str, RunningImage | Unread]:
    """Each node's running version and schematic, nodes read in parallel (a few at a time), one node per call."""

    def one(node: SiteNode) -> RunningImage | Unread:
        answer = _answered(talosctl.version(node.address))
        tag = version_tags(answer.stdout).get(node.address)
        if tag is None:  # no NODE block for it: it did not answer, whatever the exit code
            why = node_errors(answer.stderr).get(node.address) or answer.reason or "no NODE block in the answer"
            return Unread("talosctl version", why)
        listed = _answered(talosctl.extensions(node.address))
        if not listed.ok:
            return Unread("talosctl get extensions", node_errors(listed.stderr).get(node.address) or listed.reason)
        return RunningImage(tag, schematic(listed.stdout))

    with ThreadPoolExecutor(max_workers=min(4, max(1, len(nodes)))) as pool:
        return dict(zip([n.name for n in nodes], pool.map(one, nodes), strict=True))


@dataclass(frozen=True)
class Members:
    """etcd's member list as one control plane sees it."""

    through: SiteNode
    members: list[Member]


def read_members(talosctl: Talosctl, control_planes: Sequence[SiteNode]) -> Members | Unread:
    """`talosctl etcd members` through the first control plane (by name) that answers."""
    failures = []
    for node in control_planes:
        answer = _answered(talosctl.etcd_members(node.address))
        listed = members(answer.stdout)
        if answer.ok and listed:
            return Members(node, listed)
        failures.append(f"{node.name}: {node_errors(answer.stderr).get(node.address) or answer.reason or 'no rows'}")
    return Unread("talosctl etcd members", "no control plane listed the members (" + "; ".join(failures) + ")")


@dataclass(frozen=True)
class Health:
    """`talosctl health` run inside the cluster through one control plane: passed, or what it was waiting for."""

    ok: bool
    through: SiteNode
    detail: str


def read_health(talosctl: Talosctl, nodes: Sequence[SiteNode]) -> Health | Unread:
    """`talosctl health` with the site's nodes given (no discovery surprises), through the first control plane that
    runs it. A failed check is an answer (the cluster is not healthy); a control plane that cannot run it (its
    apid does not answer) hands over to the next."""
    control_planes = [n for n in nodes if n.role is Role.CONTROLPLANE]
    workers = [n.address for n in nodes if n.role is Role.WORKER]
    failures = []
    for node in control_planes:
        order = [node.address] + [n.address for n in control_planes if n is not node]
        answer = _answered(talosctl.health(order, workers))
        if answer.ok:
            return Health(True, node, "every check passed")
        if answer.returncode is None:  # not started, or stopped at its deadline: the next one would do the same
            return Unread("talosctl health", answer.reason)
        if "waiting for " in answer.stderr or "healthcheck error" in answer.stderr:
            return Health(False, node, health_failure(answer.stderr))
        failures.append(f"{node.name}: {answer.reason}")
    return Unread("talosctl health", "no control plane ran it (" + "; ".join(failures) + ")")


def read_services(talosctl: Talosctl, nodes: Sequence[SiteNode]) -> dict[str, list[Service] | Unread]:
    """`talosctl services` of every node in one call; a node with no row did not answer (its WARNING line says
    why)."""
    answer = _answered(talosctl.services([n.address for n in nodes]))
    rows = services(answer.stdout)
    errors = node_errors(answer.stderr)
    found: dict[str, list[Service] | Unread] = {}
    for node in nodes:
        own = [row for row in rows if row.node == node.address]
        if own:
            found[node.name] = own
        else:
            found[node.name] = Unread("talosctl services", errors.get(node.address) or answer.reason or "no rows")
    return found


@dataclass(frozen=True)
class LogError:
    """An error-level line of a service's log: when (None: the line carries no time) and what it says."""

    when: datetime | None
    text: str


def _time(value: object) -> datetime | None:
    if isinstance(value, int | float):
        seconds = value / 1000 if value > 1e11 else value  # the kubelet writes milliseconds, zap seconds
        return datetime.fromtimestamp(seconds, UTC)
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return None


def log_error(line: str) -> LogError | None:
    """The line as an error (etcd's zap JSON `level`; the kubelet's Kubernetes JSON, where an error is an entry
    without `v`; controller-runtime's zap console level, ANSI colours stripped; klog text `E0125 …`), None for any
    other line."""
    text = line.strip()
    if text.startswith("{"):
        try:
            entry = json.loads(text)
        except ValueError:
            return None
        if not isinstance(entry, dict) or "msg" not in entry:
            return None
        cause = entry.get("err") or entry.get("error")  # klog's ErrorS writes `err`, etcd's zap `error`
        message = str(entry["msg"]) + (f": {cause}" if cause else "")
        if "level" in entry:
            return LogError(_time(entry.get("ts")), message) if str(entry["level"]).lower() in ERROR_LEVELS else None
        if "ts" in entry and "v" not in entry:
            return LogError(_time(entry.get("ts")), message)
        return None
    plain = ANSI.sub("", text)
    words = plain.split(None, 2)
    if len(words) >= 2 and words[1].lower() in ERROR_LEVELS:
        return LogError(_time(words[0]), words[2] if len(words) > 2 else "")
    klog = KLOG_TEXT.match(plain)
    if klog:
        return LogError(None, klog.group(2))  # klog's text header has no year: not placed in time
    return None


@dataclass(frozen=True)
class LogReading:
    """Per node and service, the error lines found since `since` in the last `tail` lines (or why that log could
    not be read); `skipped`: the nodes not read (they did not answer `talosctl services`)."""

    since: datetime | None
    tail: int
    errors: dict[tuple[str, str], list[LogError] | Unread]
    skipped: list[str]


def read_logs(
    talosctl: Talosctl,
    nodes: Sequence[SiteNode],
    running: dict[str, list[Service] | Unread],
    since: datetime | None,
    tail: int = DEFAULT_TAIL,
) -> LogReading | Unread:
    """The last `tail` lines of each levelled log (`talosctl logs SERVICE --tail N`, all nodes that have it at once),
    kept: the error-level ones since `since` (lines with no time only when there is no bound). Unread when no node
    answered `talosctl services`: there is no log to read."""
    answering = [n for n in nodes if not isinstance(running.get(n.name), Unread)]
    skipped = [n.name for n in nodes if isinstance(running.get(n.name), Unread)]
    if not answering:
        return Unread("talosctl logs", "no node answered talosctl services")
    errors: dict[tuple[str, str], list[LogError] | Unread] = {}
    for service in LEVELLED_LOGS:
        having = [n for n in answering if _has(running[n.name], service)]
        if not having:
            continue
        answer = _answered(talosctl.logs([n.address for n in having], service, tail))
        by_node = log_lines(answer.stdout, [n.address for n in having])
        for node in having:
            lines = by_node[node.address]
            if not answer.ok and not lines:
                why = " ".join(line for line in answer.stderr.splitlines() if line.strip())[:300] or answer.reason
                errors[(node.name, service)] = Unread(f"talosctl logs {service}", why)
                continue
            found = [error for error in map(log_error, lines) if error is not None]
            errors[(node.name, service)] = [
                error for error in found if (since is None or (error.when is not None and error.when >= since))
            ]
    return LogReading(since, tail, errors, skipped)


def _has(rows: list[Service] | Unread, service: str) -> bool:
    """controller-runtime is a logger of machined, not a service: every node that answered has it."""
    return service == "controller-runtime" or (isinstance(rows, list) and any(row.id == service for row in rows))


# ----------------------------------------------------------------------------------------------------- kubectl
@dataclass(frozen=True)
class KubeNode:
    """A Kubernetes Node: its name, its Ready condition (`True`, `False`, `Unknown`; `absent` when it has none yet),
    why, and its labels."""

    name: str
    ready: str
    reason: str
    labels: dict[str, str]

    @property
    def control_plane(self) -> bool:
        return "node-role.kubernetes.io/control-plane" in self.labels


@dataclass
class KubeReader:
    """kubectl reads of one cluster. Once the API does not answer (refused, or a call at its deadline), later reads
    say so without calling again: one unreachable API costs one deadline, not one per check."""

    kubectl: Kubectl
    kubeconfig: Path | None
    missing: str = ""
    down: Unread | None = None

    def get(
        self, resource: str, namespace: str | None = None, name: str | None = None
    ) -> list[JsonObject] | Absent | Unread:
        """`kubectl get RESOURCE [NAME] (-A | -n NS) -o json`: the items (a List's, or the one object)."""
        call = f"kubectl get {resource}"
        if self.kubeconfig is None:
            return Unread(call, self.missing or "no kubeconfig")
        if self.down is not None:
            return self.down
        arguments = ["get", resource, *([name] if name else [])]
        arguments += ["-n", namespace] if namespace else ([] if name else ["-A"])
        arguments += ["-o", "json", f"--request-timeout={int(self.kubectl.timeout)}s"]
        answer = _answered(self.kubectl.run(arguments, self.kubeconfig))
        if not answer.ok:
            said = answer.stderr.strip().splitlines()
            last = said[-1] if said else answer.reason
            if "doesn't have a resource type" in last or "(NotFound)" in last:
                return Absent(last)
            if answer.returncode is None or "was refused" in last or "Unable to connect" in last:
                self.down = Unread(call, last if answer.returncode is not None else answer.reason)
                return self.down
            return Unread(call, last)
        try:
            document = json.loads(answer.stdout)
        except ValueError as error:
            return Unread(call, f"not JSON: {error}")
        if not isinstance(document, dict):
            return Unread(call, "not a Kubernetes object")
        items = document.get("items") if document.get("kind") == "List" or name is None else [document]
        return [item for item in items or [] if isinstance(item, dict)]

    def nodes(self) -> list[KubeNode] | Unread:
        found = self.get("nodes")
        if isinstance(found, Absent):  # nodes always exist as a resource type
            return Unread("kubectl get nodes", found.what)
        if isinstance(found, Unread):
            return found
        return [_kube_node(item) for item in found]


def _kube_node(item: JsonObject) -> KubeNode:
    metadata = item.get("metadata") or {}
    conditions = (item.get("status") or {}).get("conditions") or []
    ready = next((c for c in conditions if isinstance(c, dict) and c.get("type") == "Ready"), None)
    return KubeNode(
        str(metadata.get("name", "?")),
        str(ready.get("status", "Unknown")) if ready else "absent",
        f"{ready.get('reason', '')}: {ready.get('message', '')}".strip(": ") if ready else "no Ready condition",
        {str(k): str(v) for k, v in (metadata.get("labels") or {}).items()},
    )


# ------------------------------------------------------------------------------------------------ certificates
@dataclass(frozen=True)
class ClientCertificate:
    """A client certificate of a talosconfig context or a kubeconfig user: where it is and when it expires (None:
    unreadable, and why in `problem`)."""

    source: str
    not_after: datetime | None
    problem: str = ""


def _element(der: bytes, offset: int) -> tuple[int, int, int]:
    """One DER element at `offset`: its tag, where its content starts and where it ends."""
    tag, length = der[offset], der[offset + 1]
    start = offset + 2
    if length & 0x80:
        count = length & 0x7F
        length = int.from_bytes(der[start : start + count], "big")
        start += count
    if start + length > len(der):
        raise ValueError("truncated DER")
    return tag, start, start + length


def not_after(pem: str) -> datetime:
    """The notAfter of the first certificate of a PEM text, from its DER (standard library only: Certificate ->
    tbsCertificate -> [version] serial signature issuer validity{notBefore notAfter}; UTCTime or GeneralizedTime).
    ValueError when it is not a certificate."""
    begin = pem.find("-----BEGIN CERTIFICATE-----")
    end = pem.find("-----END CERTIFICATE-----", begin)
    if begin < 0 or end < 0:
        raise ValueError("no PEM certificate")
    try:
        der = ssl.PEM_cert_to_DER_cert(pem[begin : end + len("-----END CERTIFICATE-----")])
        _, start, _ = _element(der, 0)  # Certificate
        _, position, _ = _element(der, start)  # tbsCertificate
        tag, _, position = _element(der, position)  # version [0], or the serial
        if tag == 0xA0:
            _, _, position = _element(der, position)  # the serial
        for _ in range(2):  # signature algorithm, issuer
            _, _, position = _element(der, position)
        tag, validity, _ = _element(der, position)
        if tag != 0x30:
            raise ValueError("no validity")
        _, _, after = _element(der, validity)  # notBefore
        tag, start, stop = _element(der, after)  # notAfter
        text = der[start:stop].decode("ascii")
    except (IndexError, UnicodeDecodeError, binascii.Error) as error:
        raise ValueError(f"not a certificate ({error})") from None
    if tag == 0x17:  # UTCTime YYMMDDHHMMSSZ: RFC 5280 pivots at 50
        year = int(text[:2])
        text = f"{1900 + year if year >= 50 else 2000 + year}{text[2:]}"
    elif tag != 0x18:
        raise ValueError("notAfter is neither UTCTime nor GeneralizedTime")
    return datetime.strptime(text, "%Y%m%d%H%M%SZ").replace(tzinfo=UTC)


def _decoded(value: object, source: str) -> ClientCertificate:
    try:
        pem = base64.b64decode(str(value), validate=True).decode("ascii")
        return ClientCertificate(source, not_after(pem))
    except (ValueError, binascii.Error, UnicodeDecodeError) as error:
        return ClientCertificate(source, None, f"cannot read its certificate ({error})")


def client_certificates(texts: dict[str, str]) -> list[ClientCertificate] | Unread:
    """The client certificates of the talosconfig (every context's `crt`) and the kubeconfig (every user's
    `client-certificate-data`): base64 of PEM in both."""
    found: list[ClientCertificate] = []
    for name in (TALOSCONFIG, KUBECONFIG):
        text = texts.get(name)
        if text is None:
            continue
        try:
            document = yaml.safe_load(text)
        except yaml.YAMLError as error:
            return Unread(f"read the {name}", f"not YAML ({str(error).splitlines()[0]})")
        if not isinstance(document, dict):
            return Unread(f"read the {name}", "not a mapping")
        if name == TALOSCONFIG:
            for context, body in sorted((document.get("contexts") or {}).items()):
                if isinstance(body, dict) and body.get("crt"):
                    found.append(_decoded(body["crt"], f"talosconfig context {context}"))
        else:
            for user in document.get("users") or []:
                body = (user or {}).get("user") or {}
                if isinstance(body, dict) and body.get("client-certificate-data"):
                    found.append(_decoded(body["client-certificate-data"], f"kubeconfig user {user.get('name', '?')}"))
    return found


# ----------------------------------------------------------------------------------------------------- since
@dataclass(frozen=True)
class Since:
    """The start of the window the logs are read in, and where it comes from (said in the check's line)."""

    when: datetime | None
    source: str


def last_apply(ws: Workspace, cluster_name: str) -> Since | None:
    """The newest state backup of the cluster's platform or gitops layer, by the UTC time its name starts with:
    taken right before the last apply (or destroy, restore) terravixens made of it. None: no backup here."""
    newest: tuple[datetime, str, str] | None = None
    for layer in (ws.platform_layer(cluster_name).name, ws.gitops_layer(cluster_name).name):
        folder = ws.root / BACKUP_DIR / ws.site.site / layer
        for path in folder.glob("*.tfstate") if folder.is_dir() else ():
            stamp = BACKUP_NAME.match(path.name)
            if stamp:
                when = datetime.strptime(stamp.group(1), "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
                if newest is None or when > newest[0]:
                    newest = (when, layer, path.name)
    if newest is None:
        return None
    return Since(newest[0], f"the last apply of {newest[1]} (state backup {newest[2]})")


def since_default(ws: Workspace, cluster_name: str) -> Since:
    return last_apply(ws, cluster_name) or Since(
        None,
        f"no bound: no state backup of {ws.platform_layer(cluster_name).name} or "
        f"{ws.gitops_layer(cluster_name).name} here",
    )


def shown_time(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ------------------------------------------------------------------------------------------------ a check's view
@dataclass
class Observed:
    """Everything `terravixens check` judges, read once."""

    nodes: list[SiteNode]
    since: Since
    health: Health | Unread
    services: dict[str, list[Service] | Unread]
    logs: LogReading | Unread
    kube_nodes: list[KubeNode] | Unread
    cilium: list[JsonObject] | Absent | Unread
    pools: list[JsonObject] | Absent | Unread
    l2_policies: list[JsonObject] | Absent | Unread
    git_repositories: list[JsonObject] | Absent | Unread
    kustomizations: list[JsonObject] | Absent | Unread
    certificates: list[ClientCertificate] | Unread
    # The offsite etcd backups, oldest first (None: the site has no etcd_backup for the cluster).
    backups: list[RemoteBackup] | Unread | None = None


CILIUM = ("daemonsets", "kube-system", "cilium")
POOLS = "ciliumloadbalancerippools.cilium.io"
L2_POLICIES = "ciliuml2announcementpolicies.cilium.io"
GIT_REPOSITORIES = "gitrepositories.source.toolkit.fluxcd.io"
KUSTOMIZATIONS = "kustomizations.kustomize.toolkit.fluxcd.io"


def observe(
    site: Site,
    cluster_name: str,
    access: Access,
    talosctl: Talosctl,
    kubectl: Kubectl,
    since: Since,
    tail: int = DEFAULT_TAIL,
    progress: Callable[[str], None] = lambda _: None,
    secrets: str | None = None,
) -> Observed:
    """Reads what the checks judge: talosctl (health, services, levelled logs), kubectl (Nodes, Cilium's DaemonSet,
    LoadBalancer pools and L2 policies, Flux's GitRepositories and Kustomizations), the client certificates, and the
    offsite backups' listing (with the secrets file's bucket keys)."""
    nodes = site_nodes(site, cluster_name)
    cluster = site.clusters[cluster_name]
    health: Health | Unread
    running: dict[str, list[Service] | Unread]
    logs: LogReading | Unread
    if access.talosconfig is None:
        unread = Unread("talosctl", access.talos_missing)
        health, running, logs = unread, dict.fromkeys((n.name for n in nodes), unread), unread
    else:
        talosctl = replace(talosctl, talosconfig=access.talosconfig)
        progress("talosctl health")
        health = read_health(talosctl, nodes)
        progress("talosctl services")
        running = read_services(talosctl, nodes)
        progress("talosctl logs")
        logs = read_logs(talosctl, nodes, running, since.when, tail)
    reader = KubeReader(kubectl, access.kubeconfig, access.kube_missing)
    progress("kubectl get")
    kube_nodes = reader.nodes()
    daemonsets = reader.get(CILIUM[0], CILIUM[1], CILIUM[2])
    none: list[JsonObject] = []
    pools = reader.get(POOLS) if cluster.cilium.pools else none
    policies = reader.get(L2_POLICIES) if cluster.cilium.pools else none
    sources = reader.get(GIT_REPOSITORIES) if cluster.flux is not None else none
    kustomizations = reader.get(KUSTOMIZATIONS) if cluster.flux is not None else none
    return Observed(
        nodes,
        since,
        health,
        running,
        logs,
        kube_nodes,
        daemonsets,
        pools,
        policies,
        sources,
        kustomizations,
        client_certificates(access.texts),
        read_backups(site, cluster_name, secrets, progress),
    )


def read_backups(
    site: Site, cluster_name: str, secrets: str | None, progress: Callable[[str], None] = lambda _: None
) -> list[RemoteBackup] | Unread | None:
    """The cluster's offsite backups, oldest first; None when the site has none; Unread when the bucket (or the
    secrets file) could not be read."""
    from terravixens.operations.offsite import configured, offsite
    from terravixens.operations.outcome import OperationError

    if not configured(site, cluster_name):
        return None
    progress("list the offsite backups")
    try:
        return list_backups(offsite(site, cluster_name, secrets).bucket, cluster_name)
    except (OperationError, OffsiteError) as error:
        return Unread("list the offsite backups", str(error))


__all__ = [
    "Absent",
    "Access",
    "ClientCertificate",
    "Health",
    "KubeNode",
    "KubeReader",
    "LogError",
    "LogReading",
    "Members",
    "Observed",
    "RunningImage",
    "Since",
    "SiteNode",
    "Unread",
    "client_certificates",
    "cluster_access",
    "last_apply",
    "layer_output",
    "log_error",
    "not_after",
    "observe",
    "read_health",
    "read_images",
    "read_logs",
    "read_members",
    "read_services",
    "since_default",
    "site_nodes",
]
