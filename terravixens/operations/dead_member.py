"""`terravixens remove-dead-member CLUSTER NODE`: a control plane that died cannot leave etcd by itself, and the
reset its apply would run on destroy cannot reach it. Through a healthy control plane:

1. check that NODE really does not answer (`talosctl version`): a live node leaves etcd gracefully through the
   normal removal (take it out of the site file and deploy), never through this path;
2. find a healthy control plane (`talosctl etcd members` answers) and NODE's member id in that list (by hostname);
3. `talosctl etcd remove-member <id>` through the healthy one: quorum is computed without the dead member again;
4. delete NODE's Kubernetes Node object (kubectl, the platform layer's kubeconfig);
5. back the platform state up and `terraform state rm` NODE's configuration apply, so that no reset is attempted;
6. the operator then takes NODE out of the site file (adding a replacement keeps the count odd) and runs
   `terravixens deploy platform-CLUSTER`: its VM is deleted, nothing else is touched.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from terravixens.config.addressing import node_address
from terravixens.layers import platform_stack_name
from terravixens.operations.backup import backup_state
from terravixens.operations.console import Console
from terravixens.operations.kube import Kubectl, Runner, default_runner, delete_nodes, kubeconfig_of
from terravixens.operations.outcome import ExitCode, OperationError
from terravixens.operations.steps import apply_address, state_addresses
from terravixens.operations.terraform import Terraform
from terravixens.operations.workspace import Workspace

MEMBER_ID = re.compile(r"^[0-9a-f]{1,16}$")


@dataclass
class Talosctl:
    talosconfig: str
    binary: str = "talosctl"
    run: Runner = default_runner

    def __call__(self, node: str, *args: str):
        return self.run([self.binary, "--talosconfig", self.talosconfig, "--nodes", node, *args])


def member_id(listing: str, hostname: str) -> str | None:
    """The member id of `hostname` in `talosctl etcd members` output (NODE ID HOSTNAME PEER-URLS CLIENT-URLS …)."""
    for line in listing.splitlines():
        columns = line.split()
        if len(columns) >= 3 and columns[2] == hostname and MEMBER_ID.match(columns[1]):
            return columns[1]
    return None


def remove_dead_member(ws: Workspace, cluster_name: str, dead: str, tf: Terraform, talosctl: Talosctl,
                       kubectl: Kubectl | None = None, console: Console | None = None, synth: bool = True,
                       force: bool = False) -> int:
    console = console or Console()
    kubectl = kubectl or Kubectl()
    cluster = ws.site.clusters.get(cluster_name)
    if cluster is None:
        raise OperationError(f"unknown cluster {cluster_name!r}: use one of {', '.join(sorted(ws.site.clusters))}",
                             ExitCode.BAD_INPUT)
    if dead not in cluster.control_planes:
        raise OperationError(f"{dead!r} is not a control plane of {cluster_name} in the site file (control planes: "
                             f"{', '.join(sorted(cluster.control_planes))}); keep it in the site until its member is "
                             f"removed", ExitCode.BAD_INPUT)
    layer = platform_stack_name(cluster_name)
    address = {name: node_address(node.networks, cluster.management_vlan) for name, node in cluster.control_planes.items()}
    hostname = cluster.control_planes[dead].hostname or dead

    probe = talosctl(address[dead], "version")
    if probe.returncode == 0 and not force:
        raise OperationError(f"{dead} ({address[dead]}) answers: remove it the normal way (take it out of the site "
                             f"file and deploy; its reset leaves etcd gracefully)", ExitCode.REFUSED)
    console.step(layer, "probe", f"{dead} ({address[dead]}) does not answer")

    healthy, listing = None, ""
    for name in sorted(set(cluster.control_planes) - {dead}):
        members = talosctl(address[name], "etcd", "members")
        if members.returncode == 0:
            healthy, listing = name, members.stdout
            break
        console.step(layer, "etcd", f"{name} ({address[name]}) cannot list members: trying the next one")
    if healthy is None:
        raise OperationError(f"no control plane of {cluster_name} answers `talosctl etcd members`: etcd has lost "
                             f"quorum; restore etcd from a snapshot (talosctl bootstrap --recover-from)",
                             ExitCode.REFUSED)
    identifier = member_id(listing, hostname)
    if identifier is None:
        console.step(layer, "etcd", f"{hostname} is not a member any more (listed through {healthy})")
    else:
        removed = talosctl(address[healthy], "etcd", "remove-member", identifier)
        if removed.returncode != 0:
            raise OperationError(f"talosctl etcd remove-member {identifier} through {healthy} failed: "
                                 f"{(removed.stderr or removed.stdout).strip()[:300]}", ExitCode.FAILED)
        console.step(layer, "etcd", f"member {identifier} ({hostname}) removed through {healthy}")

    if synth:
        ws.synth()
    workdir = ws.stack_dir(layer)
    tf.init(workdir, layer)
    delete_nodes(kubectl, kubeconfig_of(tf, workdir), [hostname], console, layer)
    target = apply_address(dead)
    if target in state_addresses(tf, ws, layer):
        backup = backup_state(tf, workdir, layer, ws.site.site, ws.root, f"remove-dead-{dead}")
        console.step(layer, "backup", f"{backup.path.relative_to(ws.root)}" if backup else "no state")
        tf.check(tf.run(workdir, "state", "rm", target), "state rm", layer)
        console.step(layer, "state", f"{target} forgotten: no reset will be attempted on the dead machine")
    console.say(f"next: remove {dead} from clusters.{cluster_name}.control_planes in the site file (add a "
                f"replacement to keep an odd count), then `terravixens deploy {layer}`: its VM is deleted")
    return ExitCode.OK
