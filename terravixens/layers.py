"""The layers of a site, as values: one description per layer kind (`LAYER_KINDS`), one `Layer` per stack.

A layer is one Terraform stack with its own backend and state. Its kind says everything terravixens knows about
it besides its resources: its name, its stack class, the layer it is applied after, the providers it declares, the
key its state is kept under and what the plan guard knows of it.

    kind         level  one per      stack (terravixens.stacks.*)  after                      providers
    hypervisors  L0     site         HypervisorsStack              (first)                    proxmox
    platform     L1     cluster      PlatformStack                 hypervisors                proxmox, talos
    gitops       L1     cluster      GitopsStack                   platform-<cluster>         kubernetes, helm
    standalone   L2     guest host   StandaloneStack               hypervisors, or the stack  proxmox (the site's, or
                                                                   creating its nested host   the nested host's API)

Adding a layer kind is one entry in `LAYER_KINDS` and its stack class (a `terravixens.stacks.base.LayerStack`
with a `build()`): the app, `terravixens stacks`, the operations' layer selection and the state keys follow from
here (docs/architecture.md, "Where to touch").

Apply order (`site_layers`): by level (L0, L1, L2); inside L1 cluster by cluster (sorted by name), each cluster's
layers in the order of `LAYER_KINDS`; inside a kind, the order its `layers` gives. Every layer comes after the one
it names in `after`. Stack names are public API (state keys, `terravixens deploy LAYER`): they come from stable
names only.

Layer names are formatted here (and, for L2, in terravixens.standalone.layout, which this module reads) and
nowhere else: everything else is handed `Layer` values (`SiteLayers`, computed once per run) and reads a layer's
declared facts — its kind, its cluster, its `GuardFacts` — never its name's shape (tests/test_layers.py holds every
module of the package to it).

Pure: no cdktf import (the CLI lists layers without starting jsii); a kind names its stack class, imported only
when a stack is built.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from terravixens.config.model import Site, StateConfig
from terravixens.standalone.layout import StandaloneLayer, standalone_layers

HYPERVISORS = "hypervisors"  # the L0 kind, and its one layer's name
PLATFORM = "platform"  # the kind of a cluster's Talos machines (their talosconfig, kubeconfig and etcd)
GITOPS = "gitops"  # the kind of a cluster's Cilium and Flux
LEVELS = ("L0", "L1", "L2")


def platform_stack_name(cluster_name: str) -> str:
    return f"platform-{cluster_name}"


def gitops_stack_name(cluster_name: str) -> str:
    return f"gitops-{cluster_name}"


def state_path(state: StateConfig, name: str) -> str:
    """Local state of layer `name`: the file, relative to the project root."""
    return f"{state.local_dir}/{name}.tfstate"


def state_key(state: StateConfig, site: str, name: str) -> str:
    """S3 state of layer `name`: the object's key, one per layer under the site's prefix."""
    if state.s3 is None:
        raise ValueError(f"layer {name!r}: the site's state has no s3 settings (state.backend is {state.backend!r})")
    return f"{state.s3.key_prefix}/{site}/{name}.tfstate"


@dataclass(frozen=True)
class GuardFacts:
    """What the plan guard (terravixens.guard) knows of a layer besides its plan.

    roles: its nodes have a role from the site file (control plane, worker), which the node checks read;
    l0_usage: its plan is judged against what the site's guests use on L0 (bridges, images, the API user);
    guests_on_l0: its deployed state says which L0 resources its guests use (read when L0 is judged).
    """

    roles: bool = False
    l0_usage: bool = False
    guests_on_l0: bool = False


@dataclass(frozen=True)
class Layer:
    """One stack of a site. `name` is the stack's name: its state key, its folder cdktf.out/stacks/<name>/ and what
    `terravixens deploy LAYER` takes. `after`: the layer applied just before it (its stack depends on that one's).
    `cluster`: the cluster of an L1 layer; `guests`: what an L2 layer creates and through which Proxmox API."""

    name: str
    kind: LayerKind
    after: str | None
    guard: GuardFacts
    cluster: str | None = None
    guests: StandaloneLayer | None = field(default=None, compare=False)

    @property
    def roles_cluster(self) -> str | None:
        """The cluster whose roles the guard judges this layer's plan with (GuardFacts.roles), else None."""
        return self.cluster if self.guard.roles else None

    def state_path(self, state: StateConfig) -> str:
        return state_path(state, self.name)

    def state_key(self, state: StateConfig, site: str) -> str:
        return state_key(state, site, self.name)


@dataclass(frozen=True)
class LayerKind:
    """A kind of layer: what all its layers share, and how to find them in a site (`layers(kind, site)`)."""

    name: str
    level: str  # L0, L1 or L2 (LEVELS): the first key of the apply order
    stack: str  # "module:Class" of its stack, a terravixens.stacks.base.LayerStack
    providers: tuple[str, ...]  # the provider blocks its stack declares (tests hold the JSON to it)
    guard: GuardFacts  # what the guard knows of its layers (a layer may refine it)
    layers: Callable[[LayerKind, Site], list[Layer]] = field(repr=False)

    def stack_class(self) -> type:
        """The stack class, imported now (it starts jsii): `stack_class()(scope, site, layer, options)`."""
        module, _, name = self.stack.partition(":")
        found: type = getattr(importlib.import_module(module), name)
        return found


def _hypervisors(kind: LayerKind, site: Site) -> list[Layer]:
    return [Layer(HYPERVISORS, kind, after=None, guard=kind.guard)]


def _platforms(kind: LayerKind, site: Site) -> list[Layer]:
    return [
        Layer(platform_stack_name(cluster), kind, after=HYPERVISORS, guard=kind.guard, cluster=cluster)
        for cluster in sorted(site.clusters)
    ]


def _gitops(kind: LayerKind, site: Site) -> list[Layer]:
    """After its platform layer, whose state it reads the cluster's credentials from at plan time (ADR 0007)."""
    return [
        Layer(gitops_stack_name(cluster), kind, after=platform_stack_name(cluster), guard=kind.guard, cluster=cluster)
        for cluster in sorted(site.clusters)
    ]


def _standalone(kind: LayerKind, site: Site) -> list[Layer]:
    """`standalone` (the guests of the site's hypervisors, which L0 judges) and one `standalone-<host>` per nested
    pve host with guests (terravixens.standalone.layout, ADR 0025)."""
    return [
        Layer(
            layer.name,
            kind,
            after=layer.after or HYPERVISORS,
            guests=layer,
            guard=GuardFacts(guests_on_l0=kind.guard.guests_on_l0 and layer.host.host is None),
        )
        for layer in standalone_layers(site).values()
    ]


LAYER_KINDS: tuple[LayerKind, ...] = (
    LayerKind(
        HYPERVISORS,
        "L0",
        "terravixens.stacks.hypervisors:HypervisorsStack",
        ("proxmox",),
        GuardFacts(l0_usage=True),
        _hypervisors,
    ),
    LayerKind(
        PLATFORM,
        "L1",
        "terravixens.stacks.platform:PlatformStack",
        ("proxmox", "talos"),
        GuardFacts(roles=True, guests_on_l0=True),
        _platforms,
    ),
    LayerKind(
        GITOPS, "L1", "terravixens.stacks.gitops:GitopsStack", ("helm", "kubernetes"), GuardFacts(roles=True), _gitops
    ),
    LayerKind(
        "standalone",
        "L2",
        "terravixens.stacks.standalone:StandaloneStack",
        ("proxmox",),
        GuardFacts(guests_on_l0=True),
        _standalone,
    ),
)


def site_layers(site: Site) -> list[Layer]:
    """Every layer of the site, in apply order (see the module's docstring)."""
    found = [(LEVELS.index(kind.level), index, kind) for index, kind in enumerate(LAYER_KINDS)]
    layers = [
        (level, layer.cluster or "", index, layer) for level, index, kind in found for layer in kind.layers(kind, site)
    ]
    # Stable: a kind's own order (L2: parents first) is kept among layers of equal level, cluster and kind.
    return [layer for *_, layer in sorted(layers, key=lambda item: item[:3])]


@dataclass(frozen=True)
class SiteLayers:
    """Every layer of one site, in apply order, computed once (`SiteLayers.of(site)`; an operation's Workspace keeps
    one per run): what the operations and the guard look a layer up in — by name, by kind and cluster, or by fact."""

    site: str
    layers: tuple[Layer, ...]

    @classmethod
    def of(cls, site: Site) -> SiteLayers:
        return cls(site.site, tuple(site_layers(site)))

    def __iter__(self) -> Iterator[Layer]:
        return iter(self.layers)

    def __len__(self) -> int:
        return len(self.layers)

    @property
    def names(self) -> list[str]:
        return [layer.name for layer in self.layers]

    def get(self, name: str) -> Layer | None:
        return next((layer for layer in self.layers if layer.name == name), None)

    def named(self, name: str) -> Layer:
        """The layer called `name` (a stack name); KeyError naming the site's layers when there is none."""
        found = self.get(name)
        if found is None:
            raise KeyError(f"no layer {name!r} in site {self.site!r}: its layers are {', '.join(self.names)}")
        return found

    def select(self, names: Sequence[str]) -> list[Layer]:
        """The layers named, in apply order (KeyError for a name the site has not)."""
        for name in names:
            self.named(name)
        return [layer for layer in self.layers if layer.name in names]

    def of_cluster(self, cluster: str, kind: str) -> Layer:
        """The layer of kind `kind` of cluster `cluster` (KeyError when the site has none)."""
        for layer in self.layers:
            if layer.kind.name == kind and layer.cluster == cluster:
                return layer
        raise KeyError(f"site {self.site!r} has no {kind} layer of cluster {cluster!r}")

    def platform(self, cluster: str) -> Layer:
        """The cluster's platform layer: its Talos machines, their talosconfig and kubeconfig outputs, its etcd."""
        return self.of_cluster(cluster, PLATFORM)

    def gitops(self, cluster: str) -> Layer:
        """The cluster's GitOps layer: Cilium and Flux."""
        return self.of_cluster(cluster, GITOPS)

    def guests_on_l0(self) -> list[Layer]:
        """The layers whose deployed state says what their guests use on L0 (GuardFacts.guests_on_l0), in apply
        order: read when a plan of a layer with GuardFacts.l0_usage is judged."""
        return [layer for layer in self.layers if layer.guard.guests_on_l0]


def layer_named(site: Site, name: str) -> Layer:
    """The layer called `name` (a stack name); KeyError naming the site's layers when there is none."""
    return SiteLayers.of(site).named(name)


def stack_names(site: Site) -> list[str]:
    """The site's stack names in apply order: L0 first, then per cluster its platform stack and its GitOps stack
    (which reads the platform state), then the L2 stacks when the site has standalone nodes."""
    return [layer.name for layer in site_layers(site)]
