"""ControlPlane: bootstrap (exactly once), kubeconfig, talosconfig and the health gate of one cluster."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jsii
from cdktf import (
    DataResource,
    IListProducer,
    IResolveContext,
    Lazy,
    TerraformElement,
    TerraformOutput,
    TerraformResourceLifecycle,
)
from constructs import Construct

from terravixens._bindings.talos.cluster_kubeconfig import ClusterKubeconfig
from terravixens._bindings.talos.data_talos_client_configuration import DataTalosClientConfiguration
from terravixens._bindings.talos.data_talos_cluster_health import DataTalosClusterHealth
from terravixens._bindings.talos.machine_bootstrap import MachineBootstrap
from terravixens.catalogue import MEMBERSHIP_TYPE
from terravixens.constructs import python_blocks
from terravixens.constructs.cluster_config import ClusterConfig
from terravixens.constructs.talos_node import TalosNode
from terravixens.logical_ids import cluster_id, pin


@dataclass(frozen=True)
class ControlPlaneProps:
    """control_planes / workers: the cluster's TalosNodes by name; bootstrap_node: the one control plane that
    bootstraps etcd."""

    cluster_name: str
    cluster_config: ClusterConfig
    control_planes: dict[str, TalosNode]
    workers: dict[str, TalosNode]
    bootstrap_node: str


@jsii.implements(IListProducer)
class ApplyReferences:
    """A depends_on list produced when cdktf resolves it: the elements' references, then each node's apply
    (`TalosNode.apply_reference()`: its element's reference once it has one, else its address). The JSON is the
    one `depends_on=[elements..., node.apply...]` writes."""

    def __init__(self, elements: list[TerraformElement | Callable[[], str]], nodes: list[TalosNode]):
        self.elements = elements
        self.nodes = nodes

    @classmethod
    def of(cls, elements: list[TerraformElement | Callable[[], str]], nodes: list[TalosNode]) -> list[str]:
        """`elements`: elements, or a function giving a reference when cdktf resolves the list (a block written
        from Python: its element's reference once it has one, else its address)."""
        return Lazy.list_value(cls(elements, nodes))

    def produce(self, context: IResolveContext) -> list[str]:
        context.suppress_braces = True  # a depends_on names addresses, as cdktf's own dependables resolve them
        return [
            *(element.fqn if isinstance(element, TerraformElement) else element() for element in self.elements),
            *(node.apply_reference() for node in self.nodes),
        ]


class ControlPlane(Construct):
    """Cluster-level resources that read node addresses but never reset or replace a node.

    The control-plane count is checked by rule TV001 (terravixens.rules.odd_control_planes) at synth time.

    - Bootstrap runs once per cluster: its lifecycle ignores every change, so a new control-plane set, a new
      bootstrap node or a new address never runs it again (the provider's update and delete do nothing either).
    - The health gate (a data source) waits for etcd, apid and kubelet on every node; Kubernetes checks are skipped
      here because the CNI (Cilium) is installed by the GitOps stack. It is read during apply whenever a node or
      the member list changes (`cluster_membership`), so a leaving control plane is waited for, not reported.
    """

    def __init__(self, scope: Construct, id: str, props: ControlPlaneProps):
        super().__init__(scope, id)
        if props.bootstrap_node not in props.control_planes:
            raise ValueError(
                f"bootstrap node {props.bootstrap_node!r} is not a control plane of {props.cluster_name!r}: "
                f"pick one of {', '.join(sorted(props.control_planes))}"
            )
        self.props = props
        client = props.cluster_config.client_configuration()
        first = props.control_planes[props.bootstrap_node]
        cp_addresses = [props.control_planes[name].address for name in sorted(props.control_planes)]
        worker_addresses = [props.workers[name].address for name in sorted(props.workers)]
        nodes = [node for _, node in sorted({**props.control_planes, **props.workers}.items())]
        # Nodes whose resources are written from Python (terravixens.constructs.python_blocks) have no element to
        # depend on: the depends_on lists are then computed when cdktf resolves them (ApplyReferences).
        from_python = any(node.written_from_python for node in nodes)

        self.bootstrap = pin(
            MachineBootstrap(
                self,
                "bootstrap",
                node_attribute=first.first_contact,
                endpoint=first.first_contact,
                client_configuration=client,
                depends_on=None if from_python else [first.apply],
                lifecycle=TerraformResourceLifecycle(ignore_changes="all"),
            ),
            cluster_id("bootstrap"),
        )
        if from_python:
            self.bootstrap.depends_on = ApplyReferences.of([], [first])
        self.kubeconfig = pin(
            ClusterKubeconfig(
                self,
                "kubeconfig",
                node_attribute=first.first_contact,
                client_configuration=client,
                depends_on=[self.bootstrap],
            ),
            cluster_id("kubeconfig"),
        )
        self.talosconfig = pin(
            DataTalosClientConfiguration(
                self,
                "talosconfig",
                cluster_name=props.cluster_name,
                client_configuration=client,
                endpoints=cp_addresses,
                nodes=cp_addresses + worker_addresses,
            ),
            cluster_id("talosconfig"),
        )
        # The member list as a resource: when it changes, the health data source below is read during apply (and
        # waits for leaving members to be gone) instead of during plan, where etcd still lists them. Keyed by node
        # name, it is also terravixens' record of each node's role in the state: the plan guard reads it to know
        # whether a node that left the site was a control plane (ADR 0021), instead of guessing from configuration.
        # In the app's stacks the member list is a block written from Python (terravixens.constructs.python_blocks)
        # while the nodes' are: cdktf's DataResource runs `terraform version` at every synth (its validation, a
        # process of 50 ms or more), for a block that is plain data. `membership` creates the element on demand.
        self._membership: DataResource | None = None
        self._registry = python_blocks.blocks_for(scope) if from_python else None
        if self._registry is not None:
            path = f"{self._registry.path}/{id.replace('/', '--')}/membership"
            block = python_blocks.PythonBlock(
                "resource", MEMBERSHIP_TYPE, cluster_id("membership"), path, self._membership_body(), self
            )
            self._registry.add(self, [block])
        else:
            self.materialize()
        self.health = pin(
            DataTalosClusterHealth(
                self,
                "health",
                client_configuration=client,
                control_plane_nodes=cp_addresses,
                worker_nodes=worker_addresses,
                endpoints=cp_addresses,
                skip_kubernetes_checks=True,
                # Read after every node's configuration is applied, not only the bootstrap node's.
                depends_on=None if from_python else [self.kubeconfig, self.membership, *(node.apply for node in nodes)],
            ),
            cluster_id("health"),
        )
        if from_python:
            self.health.depends_on = ApplyReferences.of([self.kubeconfig, self.membership_reference], nodes)

        pin(TerraformOutput(self, "kubeconfig_raw", value=self.kubeconfig.kubeconfig_raw, sensitive=True), "kubeconfig")
        pin(
            TerraformOutput(
                self,
                "kubernetes_client",
                sensitive=True,
                value={
                    "host": self.kubeconfig.kubernetes_client_configuration.host,
                    "ca_certificate": self.kubeconfig.kubernetes_client_configuration.ca_certificate,
                    "client_certificate": self.kubeconfig.kubernetes_client_configuration.client_certificate,
                    "client_key": self.kubeconfig.kubernetes_client_configuration.client_key,
                },
            ),
            "kubernetes_client",
        )
        pin(
            TerraformOutput(self, "talosconfig_raw", value=self.talosconfig.talos_config, sensitive=True), "talosconfig"
        )
        pin(TerraformOutput(self, "health_checked", value=self.health.id), "health_checked")

    @property
    def membership(self) -> DataResource:
        """The cluster's member list (`terraform_data.cluster_membership`), keyed by node name and role."""
        if self._membership is None:
            if self._registry is not None:
                self._registry.materialize()  # every block of the stack becomes an element, this one included
            self.materialize()
        if self._membership is None:  # materialize() creates it; never reached
            raise RuntimeError(f"ControlPlane {self.props.cluster_name!r} has no membership element")
        return self._membership

    def membership_reference(self) -> str:
        """What a depends_on names for the member list: its element's reference, or its address while written from
        Python."""
        if self._membership is not None:
            return self._membership.fqn
        return f"{MEMBERSHIP_TYPE}.{cluster_id('membership')}"

    def materialize(self) -> None:
        """Create the member list as a cdktf element (once)."""
        if self._membership is None:
            self._membership = pin(
                DataResource(self, "membership", input=self._membership_body()["input"]), cluster_id("membership")
            )

    def _membership_body(self) -> dict[str, Any]:
        props = self.props
        return {
            "input": {
                "control_planes": {name: props.control_planes[name].address for name in sorted(props.control_planes)},
                "workers": {name: props.workers[name].address for name in sorted(props.workers)},
            }
        }
