"""Kubernetes' syntax for label keys and values (and taint keys and values, which follow it), and the labels a node
may set on itself. Pure functions of text: each returns what is wrong, as words that follow "it", or None.

Mirrors k8s.io/apimachinery validation (IsQualifiedName, IsValidLabelValue, IsDNS1123Subdomain), which Talos'
machinery copies for `machine.nodeLabels` and `machine.nodeTaints` (pkg/machinery/labels), and the NodeRestriction
admission plugin's rule for labels a kubelet sets on its own Node (plugin/pkg/admission/noderestriction,
k8s.io/kubelet/pkg/apis.IsKubeletLabel). Checked at `validate` so that a bad label fails there, with its line, and
not at apply time in a Talos controller's log.
"""

from __future__ import annotations

import re

NAME_MAX = 63
VALUE_MAX = 63
PREFIX_MAX = 253
_NAME = re.compile(r"(?:[A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]", re.ASCII)
_NAME_CHARACTER = re.compile(r"[-A-Za-z0-9_.]", re.ASCII)
_DNS_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = re.compile(rf"{_DNS_LABEL}(?:\.{_DNS_LABEL})*", re.ASCII)

# NodeRestriction: a kubelet may not set labels in these namespaces (or their subdomains) on its own Node ...
KUBERNETES_NAMESPACES = ("kubernetes.io", "k8s.io")
# ... except these (k8s.io/kubelet/pkg/apis: kubeletLabels and kubeletLabelNamespaces) ...
KUBELET_LABELS = frozenset(
    {
        "kubernetes.io/hostname",
        "kubernetes.io/arch",
        "kubernetes.io/os",
        "beta.kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
        "topology.kubernetes.io/region",
        "topology.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
    }
)
KUBELET_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")
# ... and never these, which exist for admins to mark nodes that workloads may trust.
NODE_RESTRICTION_NAMESPACE = "node-restriction.kubernetes.io"


def _in(namespace: str, domain: str) -> bool:
    return namespace == domain or namespace.endswith("." + domain)


def _name_problem(name: str) -> str | None:
    if len(name) > NAME_MAX:
        return f"has a name of {len(name)} characters (at most {NAME_MAX})"
    if _NAME.fullmatch(name):
        return None
    bad = next((character for character in name if not _NAME_CHARACTER.fullmatch(character)), None)
    if bad is not None:
        return f"holds {bad!r} in its name (only letters, digits, '-', '_' and '.')"
    return "has a name that does not start and end with a letter or digit"


def qualified_name_problem(key: str) -> str | None:
    """Why `key` is not a Kubernetes qualified name (`NAME` or `PREFIX/NAME`), or None."""
    prefix, slash, name = key.rpartition("/")
    if not slash:
        return "is empty" if not key else _name_problem(key)
    if "/" in prefix:
        return "has more than one '/'"
    if not prefix:
        return "has an empty prefix before '/'"
    if len(prefix) > PREFIX_MAX:
        return f"has a prefix of {len(prefix)} characters (at most {PREFIX_MAX})"
    if not _SUBDOMAIN.fullmatch(prefix):
        return f"has a prefix, {prefix[:60]!r}, that is not a DNS subdomain (lowercase letters, digits, '-' and '.')"
    if not name:
        return "has no name after '/'"
    return _name_problem(name)


def label_value_problem(value: str) -> str | None:
    """Why `value` is not a Kubernetes label value (empty, or a name of at most 63 characters), or None."""
    if value == "" or (len(value) <= VALUE_MAX and _NAME.fullmatch(value)):
        return None
    if len(value) > VALUE_MAX:
        return f"is {len(value)} characters long (at most {VALUE_MAX})"
    bad = next((character for character in value if not _NAME_CHARACTER.fullmatch(character)), None)
    if bad is not None:
        return f"holds {bad!r} (only letters, digits, '-', '_' and '.')"
    return "does not start and end with a letter or digit"


def kubelet_refuses(key: str) -> str | None:
    """The namespace for which NodeRestriction refuses that a node's own kubelet credentials set this label on its
    Node (`node-restriction.kubernetes.io`, `kubernetes.io` or `k8s.io`), or None when they may."""
    namespace = key.partition("/")[0] if "/" in key else ""
    if _in(namespace, NODE_RESTRICTION_NAMESPACE):
        return NODE_RESTRICTION_NAMESPACE
    domain = next((domain for domain in KUBERNETES_NAMESPACES if _in(namespace, domain)), None)
    if domain is None or key in KUBELET_LABELS or any(_in(namespace, allowed) for allowed in KUBELET_NAMESPACES):
        return None
    return domain
