"""The import graph of terravixens/ has no cycle and no upward import: data flows one way (docs/architecture.md).

    site file -> inputs -> config (model, site rules) -> talos, standalone -> layers -> constructs -> rules -> stacks
    -> JSON; the guard and the operations on top, the CLI above everything.

Every import counts: at the top of a module, inside a function (a lazy import is still a dependency) and under
`if TYPE_CHECKING:`. `from package import name` depends on the submodule when `name` is one, else on the package.
A package's own `__init__` running first is not counted (that is how Python imports, not a dependency).

    pipenv run python -m tests.test_import_graph     # modules, edges, cycles and upward imports, now
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "terravixens"

# The allowed layering, lowest first: a module may import modules of its own layer or of a layer below it. A module
# belongs to the layer of the longest prefix naming it (a prefix names a module and everything under it).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "facts and readers",
        (
            "terravixens",  # the package's __init__ only (no prefix for it: see layer_of)
            "terravixens.inputs",  # strict bounded readers of every user file
            "terravixens.roles",
            "terravixens.catalogue",
            "terravixens.logical_ids",
            "terravixens.expressions",
            "terravixens.talos_versions",  # Talos' compatibility table: the model validates against it
            "terravixens.decommission_settings",
            "terravixens.provider_install",
            "terravixens.talosctl",
            "terravixens.etcd_snapshots",  # where etcd snapshots live, their checks and retention (stdlib)
            "terravixens.guarded_path",
            "terravixens.state_files",  # which paths may apply a stack; private state files
            "terravixens.runner",
            "terravixens.exitcodes",  # branches `runner` and `ops-core` (issue 16)
            "terravixens.spec_transport",  # plain http and a private CA: one rule for the site and the node client
            "terravixens.output",  # a report as text or as its versioned JSON document (stdlib)
        ),
    ),
    ("site model", ("terravixens.config",)),
    ("what the model means", ("terravixens.talos", "terravixens.standalone")),
    ("layers", ("terravixens.layers",)),
    ("constructs", ("terravixens.constructs",)),
    ("synth rules", ("terravixens.rules",)),
    ("stacks and the app", ("terravixens.stacks", "terravixens.synth")),
    (
        "readers of plans and synthesized JSON",
        ("terravixens.guard", "terravixens.stackdiff", "terravixens.conformance"),
    ),
    (
        "commands",
        (
            "terravixens.operations",
            "terravixens.upgrade",
            "terravixens.specserver",
            "terravixens.specclient",
            "terravixens.agent",  # the node agent (issue 19): runs on the guest, built into a bundle by push
        ),
    ),
    (
        "command line",
        ("terravixens.cli", "terravixens.tfwrap", "terravixens.version", "terravixens.completion"),
    ),  # tfwrap: the Terraform `npx cdktf` runs
)

# Edges another branch removes (issue 16): excluded from the cycle and layering checks until then, and
# test_edges_owned_elsewhere_are_gone fails as soon as they are gone, so this list is emptied right away.
OWNED_ELSEWHERE: set[tuple[str, str]] = set()  # edges another branch removes: none left


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Module name -> file, for every module of the package (a package is its __init__.py)."""
    found = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: Iterable[str]) -> set[str]:
    """The modules of the package that module `name` imports."""
    known = set(known)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([node.module] if node.module else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known and "." in target:  # `import a.b.c` of a non-module attribute
                target = target.rpartition(".")[0]
            if target in known and target != name:
                found.add(target)
    return found


def graph(root: Path = ROOT) -> dict[str, set[str]]:
    found = modules(root)
    return {name: imports(name, path, found) for name, path in found.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(edges.get(module, ())):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return sorted(found)


def layer_of(module: str) -> int | None:
    """The index in LAYERS of the module's layer; None when no layer names it."""
    best: tuple[int, int] | None = None
    for position, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            named = module == prefix or (prefix != PACKAGE and module.startswith(prefix + "."))
            if named and (best is None or len(prefix) > best[0]):
                best = (len(prefix), position)
    return None if best is None else best[1]


def upward(edges: dict[str, set[str]]) -> list[str]:
    found = []
    for module, targets in sorted(edges.items()):
        for target in sorted(targets):
            here, there = layer_of(module), layer_of(target)
            if here is not None and there is not None and there > here:
                found.append(f"{module} ({LAYERS[here][0]}) imports {target} ({LAYERS[there][0]})")
    return found


def without_owned_elsewhere(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    return {module: {t for t in targets if (module, t) not in OWNED_ELSEWHERE} for module, targets in edges.items()}


@pytest.fixture(scope="module")
def edges() -> dict[str, set[str]]:
    return graph()


def test_every_module_has_a_layer(edges):
    unplaced = [module for module in sorted(edges) if layer_of(module) is None]
    assert unplaced == [], f"place these modules in LAYERS ({__file__}): {unplaced}"


def test_no_import_cycle(edges):
    assert cycles(without_owned_elsewhere(edges)) == []


def test_no_upward_import(edges):
    assert upward(without_owned_elsewhere(edges)) == []


def test_edges_owned_elsewhere_are_gone(edges):
    assert [edge for edge in sorted(OWNED_ELSEWHERE) if edge[1] in edges.get(edge[0], set())] == []


def test_the_checks_see_a_cycle_and_an_upward_import():
    """The checks can fail: a cycle through a lazy import, and the model importing the stacks."""
    edges = {
        "terravixens.config.model": {"terravixens.stacks.app"},
        "terravixens.stacks.app": {"terravixens.config.model"},
    }
    assert cycles(edges) == [["terravixens.config.model", "terravixens.stacks.app"]]
    assert upward(edges) == [
        ("terravixens.config.model (site model) imports terravixens.stacks.app (stacks and the app)")
    ]


def test_lazy_relative_and_type_checking_imports_count(tmp_path):
    package = tmp_path / PACKAGE
    (package / "low").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "low" / "__init__.py").write_text("from .leaf import VALUE\n")
    (package / "low" / "leaf.py").write_text("VALUE = 1\n")
    (package / "high.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from terravixens.low import VALUE\n"
        "def later():\n    import terravixens.low.leaf\n"
    )
    assert graph(tmp_path) == {
        "terravixens": set(),
        "terravixens.high": {"terravixens.low", "terravixens.low.leaf"},
        "terravixens.low": {"terravixens.low.leaf"},
        "terravixens.low.leaf": set(),
    }


def package_edges(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph between top-level packages and modules of terravixens (operations, upgrade, config, …)."""
    packages: dict[str, set[str]] = {}
    for module, targets in edges.items():
        for target in targets:
            top, other = (".".join(name.split(".")[:2]) for name in (module, target))
            if top != other:
                packages.setdefault(top, set()).add(other)
    return packages


def test_no_cycle_between_packages(edges):
    """Modules may be acyclic while their packages are not (drift importing a version parser from upgrade while
    upgrade imports the operations' steps): a command would then depend on another command's package."""
    assert cycles(package_edges(edges)) == []


def summary(edges: dict[str, set[str]]) -> str:
    found = cycles(edges)
    packages = package_edges(edges)
    lines = [
        (
            f"{len(edges)} modules, {sum(map(len, edges.values()))} edges, {len(found)} cycles (strongly connected "
            f"components), {len(cycles(packages))} between packages, {len(upward(edges))} upward imports"
        )
    ]
    lines += [f"  cycle: {' <-> '.join(component)}" for component in found]
    lines += [f"  package cycle: {' <-> '.join(component)}" for component in cycles(packages)]
    lines += [f"  upward: {line}" for line in upward(edges)]
    return "\n".join(lines)


if __name__ == "__main__":
    print(summary(graph(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT)))
