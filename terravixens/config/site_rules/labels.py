"""Node labels and taints as Kubernetes takes them: syntax (what the API server and Talos' config validation accept)
and the labels a worker may set on itself.

Talos writes `machine.nodeLabels` and `machine.nodeTaints` onto the Node object from the node itself (its
NodeApplyController): with a temporary admin client on a control plane, with the kubelet's own credentials on a
worker. Kubernetes' NodeRestriction admission plugin (which Talos always enables) refuses a kubelet's update that
sets a label in the kubernetes.io or k8s.io namespaces other than the kubelet's own (docs/adr/0032), and labels and
taints travel in one update: one such label on a worker and none of its labels or taints land. Every message names
the field, the value and the fix; the rules judge only what `validate` can see (not what a running cluster holds).
"""

from __future__ import annotations

from collections.abc import Iterator

from terravixens.config.kubernetes_names import (
    NODE_RESTRICTION_NAMESPACE,
    kubelet_refuses,
    label_value_problem,
    qualified_name_problem,
)
from terravixens.config.model import Site
from terravixens.config.site_rules.walk import Finding, all_nodes
from terravixens.inputs import shown, shown_at
from terravixens.roles import Role

KEY_FIX = (
    "write NAME or PREFIX/NAME (NAME: 1-63 letters, digits, '-', '_' or '.', a letter or digit at both ends; "
    "PREFIX: a lowercase DNS subdomain), e.g. example.com/pool"
)
VALUE_FIX = "use up to 63 letters, digits, '-', '_' or '.', a letter or digit at both ends, or an empty value"


def label_syntax(site: Site) -> Iterator[Finding]:
    for at in all_nodes(site):
        for key, value in at.node.labels.items():
            path = (*at.path, "labels", key)
            problem = qualified_name_problem(key)
            if problem:
                yield path, f"label key {shown(key)} is not a Kubernetes qualified name: it {problem}; {KEY_FIX}"
            problem = label_value_problem(value)
            if problem:
                yield (
                    path,
                    (f"label value {shown_at(path, value)} is not a Kubernetes label value: it {problem}; {VALUE_FIX}"),
                )


def labels_a_worker_may_set(site: Site) -> Iterator[Finding]:
    """On a worker, Talos sets the labels as the node itself: NodeRestriction decides (control planes: an admin)."""
    for at in all_nodes(site):
        if at.role is not Role.WORKER:
            continue
        for key in at.node.labels:
            refused = None if qualified_name_problem(key) else kubelet_refuses(key)
            if refused is None:
                continue
            path, name = (*at.path, "labels", key), key.rpartition("/")[2]
            if refused == NODE_RESTRICTION_NAMESPACE:
                yield (
                    path,
                    (
                        "only a cluster admin may set a node-restriction.kubernetes.io label (it marks nodes "
                        "that workloads may trust): Talos writes a worker's labels as the worker itself, which "
                        "NodeRestriction refuses (no label lands); set it with kubectl label node as an admin"
                    ),
                )
            else:
                yield (
                    path,
                    (
                        f"a worker may not set a {refused} label on itself but the kubelet's own: Talos writes "
                        f"a worker's labels with its kubelet credentials and NodeRestriction refuses the update "
                        f"(no label lands); use example.com/{name} or node.kubernetes.io/{name}, or kubectl "
                        f"label it as an admin"
                    ),
                )


def taint_syntax(site: Site) -> Iterator[Finding]:
    """A taint's key is a qualified name and its value a label value (its effect is checked by the model)."""
    for at in all_nodes(site):
        for index, taint in enumerate(at.node.taints):
            path = (*at.path, "taints", index)
            problem = qualified_name_problem(taint.key)
            if problem:
                yield (
                    (*path, "key"),
                    (f"taint key {shown(taint.key)} is not a Kubernetes qualified name: it {problem}; {KEY_FIX}"),
                )
            problem = label_value_problem(taint.value)
            if problem:
                yield (
                    (*path, "value"),
                    (
                        f"taint value {shown_at((*path, 'value'), taint.value)} is not valid in "
                        f"Kubernetes: it {problem}; {VALUE_FIX}"
                    ),
                )
