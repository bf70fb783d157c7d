"""`terravixens show`: the site at a glance — hypervisors, clusters, nodes, the L2 parent tree and the layers.

One pure function, `view(site)`, reads the validated model (terravixens.config, the placement and address chain,
terravixens.layers) into a value; one renderer per format writes it:

    table     `kubectl get`-like tables (rich), the standalone nodes as a tree (host → guests)
    json      one versioned shape, `{"schema": "terravixens/show/v1", …}`, described by show.schema.json next to
              this module (docs/commands.md#show)
    mermaid   a `graph` of hypervisors → nodes → layers and the L2 parent tree

Nothing is synthesized and nothing is asked of a cluster: versions and addresses are what the site file says (the
desired state; `terravixens drift` compares it with what runs). `terravixens review` draws its blast radius from the
same view (`mermaid(view, highlight)`), which is why this module is a shared step, not a command of its own.

Site text reaches two languages here, and neither may read it as its own: rich renders every cell as `Text` (a
bridge named `[red]x` is printed as written, not as markup), and mermaid gets only ids this module builds and labels
whose every character outside a small safe set is an entity code (`#35;`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TextIO

from terravixens.arguments import Definition, site_option
from terravixens.config.loader import warnings
from terravixens.config.model import Site
from terravixens.config.placement import placed_nodes
from terravixens.exitcodes import ExitCode, codes
from terravixens.layers import SiteLayers
from terravixens.standalone.layout import layer_of_node
from terravixens.standalone.topology import placement

SCHEMA = "terravixens/show/v1"
SCHEMA_FILE = Path(__file__).with_name("show.schema.json")
FORMATS = ("table", "json", "mermaid")
# Output that is not a terminal (a pipe, a file, a test) is laid out at this width whatever $COLUMNS says, so the
# same site always prints the same bytes; wide enough that a typical site's node table never wraps.
PIPE_WIDTH = 200


# ------------------------------------------------------------------------------------------------------ the view
@dataclass(frozen=True)
class BridgeView:
    name: str
    ports: tuple[str, ...]
    vlan_aware: bool
    vlans: tuple[int, ...]


@dataclass(frozen=True)
class HypervisorView:
    name: str
    node_name: str
    bridges: tuple[BridgeView, ...]
    datastores: dict[str, str]  # role (vm, images) -> Proxmox datastore
    api_user: str | None
    layer: str


@dataclass(frozen=True)
class ClusterView:
    name: str
    talos_version: str
    config_contract: str
    kubernetes_version: str
    endpoint_vip: str
    management_vlan: int
    control_planes: int
    workers: int
    layers: tuple[str, ...]


@dataclass(frozen=True)
class NodeView:
    """A cluster node. `address`: where terravixens manages it (terravixens.config.addressing); `mac_address`: only
    when the site pins one (else Proxmox picks it)."""

    cluster: str
    name: str
    hostname: str
    role: str
    hypervisor: str
    vm_id: int
    address: str
    mac_address: str | None
    talos_version: str
    kubernetes_version: str
    layer: str
    cpu: int
    memory_mib: int
    disk_gib: int


@dataclass(frozen=True)
class GuestView:
    """A standalone node (L2). `chain`: the hypervisor, then each nested pve host down to its parent."""

    name: str
    type: str
    parent: str
    hypervisor: str
    chain: tuple[str, ...]
    tier: int
    vm_id: int
    address: str
    spec: str
    layer: str
    cores: int
    memory_mib: int
    disk_gib: int


@dataclass(frozen=True)
class LayerView:
    name: str
    kind: str
    level: str
    after: str | None
    cluster: str | None


@dataclass(frozen=True)
class WarningView:
    """What a site rule warns about in a valid site (terravixens.config.site_rules.cautions): the field and the
    message, which says the fix."""

    field: str
    message: str


@dataclass(frozen=True)
class SiteView:
    site: str
    proxmox_endpoint: str
    state_backend: str
    hypervisors: tuple[HypervisorView, ...]
    clusters: tuple[ClusterView, ...]
    nodes: tuple[NodeView, ...]  # by cluster, then by name
    standalone: tuple[GuestView, ...]  # parents first, then by name
    layers: tuple[LayerView, ...]  # in apply order
    warnings: tuple[WarningView, ...] = ()  # the site rules' cautions, in rule order


def view(site: Site) -> SiteView:
    """The site at a glance, from the validated model alone (nothing synthesized, nothing asked of a cluster)."""
    known = SiteLayers.of(site)
    layers = tuple(
        LayerView(layer.name, layer.kind.name, layer.kind.level, layer.after, layer.cluster) for layer in known
    )
    [l0] = [layer.name for layer in known if layer.kind.level == "L0"]  # the layer of the hypervisors
    hypervisors = tuple(
        HypervisorView(
            name=name,
            node_name=hypervisor.node_name,
            bridges=tuple(
                BridgeView(bridge_name, tuple(bridge.ports), bridge.vlan_aware, tuple(bridge.vlans))
                for bridge_name, bridge in sorted(hypervisor.bridges.items())
            ),
            datastores={"vm": hypervisor.datastores.vm, "images": hypervisor.datastores.images},
            api_user=hypervisor.api_user.user_id if hypervisor.api_user else None,
            layer=l0,
        )
        for name, hypervisor in sorted(site.hypervisors.items())
    )
    clusters, nodes = [], []
    for cluster_name, cluster in sorted(site.clusters.items()):
        clusters.append(
            ClusterView(
                name=cluster_name,
                talos_version=cluster.talos_version,
                config_contract=cluster.contract,
                kubernetes_version=cluster.kubernetes_version,
                endpoint_vip=cluster.endpoint_vip,
                management_vlan=cluster.management_vlan,
                control_planes=len(cluster.control_planes),
                workers=len(cluster.workers),
                layers=tuple(layer.name for layer in layers if layer.cluster == cluster_name),
            )
        )
        for placed in placed_nodes(site, cluster_name).values():
            nodes.append(
                NodeView(
                    cluster=cluster_name,
                    name=placed.name,
                    hostname=placed.hostname,
                    role=str(placed.role),
                    hypervisor=placed.hypervisor_name,
                    vm_id=placed.node.vm_id,
                    address=placed.address,
                    mac_address=placed.node.mac_address,
                    talos_version=cluster.talos_version,
                    kubernetes_version=cluster.kubernetes_version,
                    layer=known.platform(cluster_name).name,
                    cpu=placed.node.cpu,
                    memory_mib=placed.node.memory_mib,
                    disk_gib=placed.node.disk_gib,
                )
            )
    created_by = layer_of_node(site)
    standalone = tuple(
        GuestView(
            name=guest.name,
            type=guest.type,
            parent=guest.parent,
            hypervisor=guest.hypervisor,
            chain=guest.chain,
            tier=guest.tier,
            vm_id=guest.vm_id,
            address=guest.address,
            spec=guest.spec,
            layer=created_by[guest.name],
            cores=guest.cores,
            memory_mib=guest.memory_mib,
            disk_gib=guest.disk_gib,
        )
        for guest in placement(site).values()
    )
    return SiteView(
        site=site.site,
        proxmox_endpoint=site.proxmox.endpoint,
        state_backend=site.state.backend,
        hypervisors=hypervisors,
        clusters=tuple(clusters),
        nodes=tuple(nodes),
        standalone=standalone,
        layers=layers,
        warnings=tuple(WarningView(problem.field, problem.message) for problem in warnings(site)),
    )


# ------------------------------------------------------------------------------------------------------ json
def to_json(shown: SiteView) -> dict[str, Any]:
    """The versioned JSON shape (show.schema.json): lists in the view's order, every field always present; plain
    JSON values (lists, not the view's tuples), so it compares equal to what a reader parses."""
    document: dict[str, Any] = json.loads(json.dumps(_document(shown)))
    return document


def _document(shown: SiteView) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "site": shown.site,
        "proxmox": {"endpoint": shown.proxmox_endpoint},
        "state": {"backend": shown.state_backend},
        "hypervisors": [asdict(hypervisor) for hypervisor in shown.hypervisors],
        "clusters": [asdict(cluster) for cluster in shown.clusters],
        "nodes": [asdict(node) for node in shown.nodes],
        "standalone": [asdict(guest) for guest in shown.standalone],
        "layers": [asdict(layer) for layer in shown.layers],
        "warnings": [asdict(warning) for warning in shown.warnings],
    }


def schema() -> dict[str, Any]:
    """The committed JSON Schema of `to_json`'s shape."""
    loaded: dict[str, Any] = json.loads(SCHEMA_FILE.read_text())
    return loaded


# ------------------------------------------------------------------------------------------------------ table
def _bridges(hypervisor: HypervisorView) -> str:
    parts = []
    for bridge in hypervisor.bridges:
        details = [",".join(bridge.ports)] if bridge.ports else []
        if bridge.vlans:
            details.append(f"VLANs {','.join(str(vlan) for vlan in bridge.vlans)}")
        elif bridge.vlan_aware:
            details.append("VLAN-aware")
        parts.append(f"{bridge.name} ({'; '.join(details)})" if details else bridge.name)
    return " ".join(parts) or "-"


def _guest_line(guest: GuestView) -> str:
    return (
        f"{guest.name}  {guest.type}  id {guest.vm_id}  {guest.address}  spec {guest.spec}  "
        f"{guest.cores} cpu {guest.memory_mib} MiB {guest.disk_gib} GiB  layer {guest.layer}"
    )


TITLE = "bold cyan"
# A node's role stands out on a terminal; nothing else is coloured (colour is a hint, the text says it all).
ROLE_STYLES = {"controlplane": "magenta", "worker": "green"}


def _renderables(shown: SiteView) -> list[Any]:
    """What the table format prints, in order. Every cell is a `Text`: site text is never read as rich markup."""
    from rich.table import Table
    from rich.text import Text
    from rich.tree import Tree

    def table(title: str, headers: Iterable[str], rows: Iterable[Iterable[object]], roles: int | None = None) -> Table:
        """`roles`: the column holding a node's role, coloured by ROLE_STYLES."""
        found = Table(
            title=Text(title, style=TITLE),
            title_justify="left",
            box=None,
            padding=(0, 3, 0, 0),
            pad_edge=False,
            show_edge=False,
            header_style="bold",
        )
        for header in headers:
            found.add_column(Text(header), no_wrap=True)
        for row in rows:
            found.add_row(
                *(
                    Text("-" if cell is None else str(cell), style=ROLE_STYLES.get(str(cell), "") if i == roles else "")
                    for i, cell in enumerate(row)
                )
            )
        return found

    out: list[Any] = [
        Text(
            f"site {shown.site}   proxmox {shown.proxmox_endpoint}   state {shown.state_backend}   "
            f"layers {' → '.join(layer.name for layer in shown.layers)}"
        ),
        Text(""),
        table(
            "HYPERVISORS",
            ("NAME", "PVE NODE", "BRIDGES", "DATASTORES", "API USER"),
            (
                (
                    h.name,
                    h.node_name,
                    _bridges(h),
                    " ".join(f"{role}={store}" for role, store in h.datastores.items()),
                    h.api_user,
                )
                for h in shown.hypervisors
            ),
        ),
    ]
    if shown.clusters:
        out += [
            Text(""),
            table(
                "CLUSTERS",
                ("NAME", "TALOS", "CONTRACT", "KUBERNETES", "VIP", "NODES", "LAYERS"),
                (
                    (
                        c.name,
                        c.talos_version,
                        c.config_contract,
                        c.kubernetes_version,
                        f"{c.endpoint_vip} (VLAN {c.management_vlan})",
                        f"{c.control_planes} cp + {c.workers} wk",
                        " ".join(c.layers),
                    )
                    for c in shown.clusters
                ),
            ),
            Text(""),
            table(
                "NODES",
                ("CLUSTER", "NAME", "ROLE", "HYPERVISOR", "VM ID", "ADDRESS", "MAC", "TALOS", "KUBERNETES", "LAYER"),
                (
                    (
                        n.cluster,
                        n.name if n.hostname == n.name else f"{n.name} ({n.hostname})",
                        n.role,
                        n.hypervisor,
                        n.vm_id,
                        n.address,
                        n.mac_address,
                        n.talos_version,
                        n.kubernetes_version,
                        n.layer,
                    )
                    for n in shown.nodes
                ),
                roles=2,
            ),
        ]
    else:
        out += [Text(""), Text("CLUSTERS: none", style=TITLE)]
    out.append(Text(""))
    if not shown.standalone:
        out.append(Text("STANDALONE (L2): none", style=TITLE))
        return out + _warnings(shown)
    out.append(Text("STANDALONE (L2): host → guests", style=TITLE))
    children: dict[str, list[GuestView]] = {}
    for guest in shown.standalone:
        children.setdefault(guest.parent, []).append(guest)

    def grow(branch: Tree, parent: str) -> None:
        for guest in children.get(parent, []):
            grow(branch.add(Text(_guest_line(guest))), guest.name)

    for hypervisor in shown.hypervisors:
        if hypervisor.name in children:
            tree = Tree(Text(f"{hypervisor.name}  hypervisor"), guide_style="dim")
            grow(tree, hypervisor.name)
            out.append(tree)
    return out + _warnings(shown)


def _warnings(shown: SiteView) -> list[Any]:
    """The site rules' warnings, last (nothing when there are none): each its field, then its message."""
    from rich.text import Text

    if not shown.warnings:
        return []
    found: list[Any] = [Text(""), Text("WARNINGS", style="bold yellow")]
    for warning in shown.warnings:
        found.append(Text(f"{warning.field}: {warning.message}"))
    return found


def render_table(shown: SiteView, out: TextIO, environ: Mapping[str, str] | None = None) -> None:
    """Tables on `out`. Colour only on a terminal without NO_COLOR (https://no-color.org); anything else gets plain
    text at a fixed width with no trailing blanks, so the same site prints the same bytes."""
    from rich.console import Console

    environ = os.environ if environ is None else environ
    terminal = bool(getattr(out, "isatty", lambda: False)())
    if terminal:
        # NO_COLOR: "present and not an empty string" (no-color.org); styles that are not colours (bold) stay.
        console = Console(file=out, no_color=bool(environ.get("NO_COLOR")), highlight=False, emoji=False, markup=False)
        for renderable in _renderables(shown):
            console.print(renderable)
        return
    console = Console(
        file=out,
        width=PIPE_WIDTH,
        color_system=None,
        force_terminal=False,
        no_color=True,
        highlight=False,
        emoji=False,
        markup=False,
        record=True,
    )
    with console.capture() as captured:
        for renderable in _renderables(shown):
            console.print(renderable)
    out.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))


# ------------------------------------------------------------------------------------------------------ mermaid
SAFE_LABEL = re.compile(r"[A-Za-z0-9 .,:/_=+-]")
HIGHLIGHT_CLASSES = {
    "touched": "fill:#fff3cd,stroke:#b58100,stroke-width:2px",
    "flagged": "fill:#f8d7da,stroke:#b00020,stroke-width:3px",
}


def label(text: str) -> str:
    """Site text as a mermaid label: every character outside a small safe set becomes an entity code (`#34;`), so
    quotes, brackets, `<`, `;`, `%%` or a newline can neither end the label nor start markup."""
    return "".join(char if SAFE_LABEL.fullmatch(char) else f"#{ord(char)};" for char in text)


class _Ids:
    """Mermaid ids: a kind prefix and the name with anything but letters, digits and '_' made '_' (a keyword like
    `end` or `graph` never stands alone), numbered when two names clean to the same id."""

    def __init__(self) -> None:
        self.by_key: dict[str, str] = {}
        self.taken: set[str] = set()

    def __call__(self, key: str) -> str:
        if key not in self.by_key:
            kind, _, name = key.partition(":")
            base = f"{kind}_{re.sub(r'[^A-Za-z0-9_]', '_', name)}"
            candidate, number = base, 1
            while candidate in self.taken:
                number += 1
                candidate = f"{base}_{number}"
            self.taken.add(candidate)
            self.by_key[key] = candidate
        return self.by_key[key]


def hypervisor_key(name: str) -> str:
    return f"hv:{name}"


def node_key(cluster: str, name: str) -> str:
    return f"node:{cluster}/{name}"


def guest_key(name: str) -> str:
    return f"sa:{name}"


def layer_key(name: str) -> str:
    return f"layer:{name}"


def keys(shown: SiteView) -> set[str]:
    """Every element the mermaid graph draws, by key (hv:, node:, sa:, layer:): what a highlight may name."""
    return (
        {hypervisor_key(h.name) for h in shown.hypervisors}
        | {node_key(n.cluster, n.name) for n in shown.nodes}
        | {guest_key(g.name) for g in shown.standalone}
        | {layer_key(layer.name) for layer in shown.layers}
    )


def mermaid(shown: SiteView, highlight: Mapping[str, str] | None = None) -> str:
    """A `graph LR`: hypervisors → the nodes on them → the layer creating each; nested pve hosts → their guests;
    layers in apply order (dotted). `highlight`: key → class (`touched`, `flagged`), for review's blast radius;
    elements not named stay plain."""
    ids = _Ids()
    lines = ["graph LR"]
    for hypervisor in shown.hypervisors:
        text = (
            hypervisor.name
            if hypervisor.node_name == hypervisor.name
            else f"{hypervisor.name} ({hypervisor.node_name})"
        )
        lines.append(f'  {ids(hypervisor_key(hypervisor.name))}[["{label(text)}"]]')
    for layer in shown.layers:
        lines.append(f'  {ids(layer_key(layer.name))}[("{label(f"{layer.level} {layer.name}")}")]')
    for node in shown.nodes:
        text = _label_lines(node.name, f"{node.role}, id {node.vm_id}, {node.address}")
        lines.append(f'  {ids(node_key(node.cluster, node.name))}("{text}")')
    for guest in shown.standalone:
        text = _label_lines(guest.name, f"{guest.type}, id {guest.vm_id}, {guest.address}")
        lines.append(f'  {ids(guest_key(guest.name))}("{text}")')
    for hypervisor in shown.hypervisors:
        lines.append(f"  {ids(hypervisor_key(hypervisor.name))} --> {ids(layer_key(hypervisor.layer))}")
    for node in shown.nodes:
        here = ids(node_key(node.cluster, node.name))
        lines.append(f"  {ids(hypervisor_key(node.hypervisor))} --> {here}")
        lines.append(f"  {here} --> {ids(layer_key(node.layer))}")
    hosts = {hypervisor.name for hypervisor in shown.hypervisors}
    for guest in shown.standalone:
        here = ids(guest_key(guest.name))
        parent = hypervisor_key(guest.parent) if guest.parent in hosts else guest_key(guest.parent)
        lines.append(f"  {ids(parent)} --> {here}")
        lines.append(f"  {here} --> {ids(layer_key(guest.layer))}")
    for layer in shown.layers:
        if layer.after is not None:
            lines.append(f"  {ids(layer_key(layer.after))} -.-> {ids(layer_key(layer.name))}")
    lines += [
        "  classDef hypervisor stroke-width:2px",
        "  classDef layer stroke-dasharray:4",
    ]
    lines.append(f"  class {','.join(ids(hypervisor_key(h.name)) for h in shown.hypervisors)} hypervisor")
    if shown.layers:
        lines.append(f"  class {','.join(ids(layer_key(layer.name)) for layer in shown.layers)} layer")
    drawn = keys(shown)
    for name, style in HIGHLIGHT_CLASSES.items():
        marked = sorted(ids(key) for key, kind in (highlight or {}).items() if kind == name and key in drawn)
        if marked:
            lines += [f"  classDef {name} {style}", f"  class {','.join(marked)} {name}"]
    return "\n".join(lines) + "\n"


def _label_lines(*lines: str) -> str:
    """Lines of a label, each escaped, joined by `<br/>` (written here, never taken from site text)."""
    return "<br/>".join(label(line) for line in lines)


# ------------------------------------------------------------------------------------------------------ command
def show(site: Site, fmt: str, out: TextIO) -> None:
    """`terravixens show`: the site in `fmt` (one of FORMATS) on `out`."""
    shown = view(site)
    if fmt == "json":
        out.write(json.dumps(to_json(shown), indent=2) + "\n")
    elif fmt == "mermaid":
        out.write(mermaid(shown))
    else:
        render_table(shown, out)


# ------------------------------------------------------------------------------------------------- command line
def arguments(parser: argparse.ArgumentParser) -> None:
    site_option(parser)
    parser.add_argument(
        "--format",
        choices=("table", "json", "mermaid"),
        default="table",
        help="table (default), json (schema terravixens/show/v1) or mermaid (a graph)",
    )
    parser.add_argument("--json", action="store_true", help="the same as --format json (as every --json command)")


def command(args: argparse.Namespace, site: Site) -> int:
    show(site, "json" if args.json else args.format, sys.stdout)
    return ExitCode.OK


SHOW = Definition(
    arguments,
    command,
    codes(
        ExitCode.OK,
        (ExitCode.BAD_INPUT, "the site file has problems: every one printed, with its file and line"),
        ExitCode.INTERRUPTED,
    ),
    examples=(
        "terravixens show",
        "terravixens show --site sites/standalone.yaml --format mermaid",
        "terravixens show --json",
    ),
)


__all__ = [
    "FORMATS",
    "SCHEMA",
    "SHOW",
    "SiteView",
    "arguments",
    "command",
    "guest_key",
    "hypervisor_key",
    "keys",
    "label",
    "layer_key",
    "mermaid",
    "node_key",
    "render_table",
    "schema",
    "show",
    "to_json",
    "view",
]
