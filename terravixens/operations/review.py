"""`terravixens review BASE`: what a pull request does to each stack and node, as Markdown for a PR comment.

The site is synthesized twice — at BASE (a git ref: the library *and* the site file as they were, from a
temporary `git worktree`, so the working tree is never touched) and in the working tree — and the two outputs are
diffed structurally (terravixens.stackdiff): per stack and per node, the addresses added, removed and changed,
with the attribute paths that change. An address owned by a node the change does not name (its site entry, its
cluster's settings or its hypervisor's spec did not change) is flagged: that is the promise breaking.
`--before DIR --after DIR` compares two cdktf.out directories instead.

Above the tables, a mermaid picture of the blast radius: the working tree's site as `terravixens show` draws it
(terravixens.operations.show, the same view), with the hypervisors, nodes and layers the change touches in class
`touched`, those of nodes it does not name in class `flagged`, the rest plain.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from terravixens import runner
from terravixens.arguments import Definition, json_option, site_option
from terravixens.config.loader import DEFAULT_SITE, SITE_ENV, SiteError, load_site
from terravixens.config.model import Site
from terravixens.exitcodes import ExitCode, codes
from terravixens.inputs import InputError, load_json, load_yaml, read_text
from terravixens.logical_ids import owner_of
from terravixens.operations.files import private_directory, require_new_file, write_new
from terravixens.operations.outcome import OperationError
from terravixens.operations.show import guest_key, hypervisor_key, keys, layer_key, mermaid, node_key, view
from terravixens.operations.summary import owner
from terravixens.output import render
from terravixens.stackdiff import Changes, diff
from terravixens.synth import rule_messages

SYNTH_SCRIPT = """
import sys
from terravixens.config.loader import load_site
from terravixens.stacks import build_app
build_app(load_site(sys.argv[1]), sys.argv[2]).synth()
"""
ROW_LIMIT = 200


@dataclass
class Named:
    """What the change itself names: nodes whose own entry changed, clusters whose settings changed (all their
    nodes), hypervisors whose spec changed (the nodes on them)."""

    nodes: set[str] = field(default_factory=set)
    clusters: set[str] = field(default_factory=set)
    hypervisors: set[str] = field(default_factory=set)

    def describe(self) -> str:
        parts = []
        if self.nodes:
            parts.append(f"nodes {', '.join(sorted(self.nodes))}")
        if self.clusters:
            parts.append(f"cluster settings of {', '.join(sorted(self.clusters))}")
        if self.hypervisors:
            parts.append(f"hypervisors {', '.join(sorted(self.hypervisors))}")
        return "; ".join(parts) or "nothing in the site file (a code change)"


def _nodes(data: dict[str, Any]) -> dict[str, tuple[str, str, dict[str, Any]]]:
    """node -> (cluster, role map, entry) of a raw site document."""
    found: dict[str, tuple[str, str, dict[str, Any]]] = {}
    for cluster_name, cluster in (data.get("clusters") or {}).items():
        for role_map in ("control_planes", "workers"):
            for node_name, entry in ((cluster or {}).get(role_map) or {}).items():
                found[str(node_name)] = (str(cluster_name), role_map, entry)
    return found


def _plain(document: dict[str, Any]) -> dict[str, Any]:
    """Keys as text (YAML reads `111:` as a number, JSON as text): equal documents compare equal."""
    plain: dict[str, Any] = json.loads(json.dumps(document, default=str))
    return plain


def named_by_change(before: dict[str, Any], after: dict[str, Any]) -> Named:
    before, after = _plain(before), _plain(after)
    named = Named()
    old, new = _nodes(before), _nodes(after)
    named.nodes = {name for name in set(old) | set(new) if old.get(name) != new.get(name)}

    def strip(cluster: dict[str, Any] | None) -> dict[str, Any]:
        return {k: v for k, v in (cluster or {}).items() if k not in ("control_planes", "workers")}

    for cluster_name in set(before.get("clusters") or {}) | set(after.get("clusters") or {}):
        if strip((before.get("clusters") or {}).get(cluster_name)) != strip(
            (after.get("clusters") or {}).get(cluster_name)
        ):
            named.clusters.add(str(cluster_name))
    for hypervisor in set(before.get("hypervisors") or {}) | set(after.get("hypervisors") or {}):
        if (before.get("hypervisors") or {}).get(hypervisor) != (after.get("hypervisors") or {}).get(hypervisor):
            named.hypervisors.add(str(hypervisor))
    for name, (cluster_name, _, entry) in {**old, **new}.items():
        if cluster_name in named.clusters or (entry or {}).get("hypervisor") in named.hypervisors:
            named.nodes.add(name)
    return named


def read_stacks(outdir: Path) -> dict[str, dict[str, Any]]:
    stacks: dict[str, dict[str, Any]] = {}
    for path in sorted((outdir / "stacks").glob("*/cdk.tf.json")):
        try:
            stack = load_json(read_text(path, limit=256 * 1024 * 1024, what="stack"), path, what="stack")
        except InputError as error:
            raise OperationError(str(error), ExitCode.BAD_INPUT) from None
        if not isinstance(stack, dict):
            raise OperationError(f"{path}: not a synthesized stack (a JSON object)", ExitCode.BAD_INPUT)
        stacks[path.parent.name] = stack
    if not stacks:
        raise OperationError(f"{outdir}: no stacks/*/cdk.tf.json: give a cdktf.out directory", ExitCode.BAD_INPUT)
    return stacks


GIT_TIMEOUT = 300.0
SYNTH_TIMEOUT = 900.0


def git(root: Path, *args: str) -> runner.Ran:
    """git through the bounded runner: a missing git or a hung one is an answer (returncode None, reason)."""
    return runner.run(["git", "-C", str(root), *args], timeout=GIT_TIMEOUT, label=f"git {args[0]}")


def start_synth(code_root: Path, site: Path, outdir: Path, *paths: Path) -> Future[runner.Ran]:
    """A synth in its own process (through the bounded runner, on a worker thread so two run at once), with the
    library found first under `code_root`. A signal in the main thread ends it with every other runner call."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(str(p) for p in (code_root, *paths)))
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="terravixens-synth")
    try:
        return pool.submit(
            runner.run,
            [sys.executable, "-c", SYNTH_SCRIPT, str(site), str(outdir)],
            timeout=SYNTH_TIMEOUT,
            cwd=str(code_root),
            env=env,
            label="synth",
        )
    finally:
        pool.shutdown(wait=False)


def finish_synth(started: Future[runner.Ran], what: str, outdir: Path) -> dict[str, dict[str, Any]]:
    """The synth's stacks; a synth the safety rules stopped is REFUSED with their messages (read from the child's
    error text: the code at BASE may predate any helper), any other failure BAD_INPUT with its tail (a synth past
    its deadline: its reason)."""
    ran = started.result()
    if not ran.ok:
        messages = rule_messages(RuntimeError(ran.stderr or "")) if ran.returncode is not None else None
        if messages is not None:
            raise OperationError(f"synth {what} stopped by safety rules:\n{messages}", ExitCode.REFUSED)
        detail = (ran.stderr or ran.stdout).strip()[-1500:] if ran.returncode is not None else ran.reason
        raise OperationError(f"synth {what} failed:\n{detail}", ExitCode.BAD_INPUT)
    return read_stacks(outdir)


def link_bindings(tree: Path) -> None:
    """The generated bindings are not committed: the ones this library runs with serve the base's code too, as
    terravixens._bindings and, for a base from before they moved into the package (ADR 0041), as `imports`."""
    bindings = Path(__file__).resolve().parents[1] / "_bindings"
    for link in (tree / "terravixens" / "_bindings", tree / "imports"):
        if link.parent.is_dir() and not link.exists():
            link.symlink_to(bindings, target_is_directory=True)


def synth_at(root: Path, ref: str, site: str, outdir: Path) -> dict[str, dict[str, Any]]:
    """Synthesizes `site` (a path relative to the repository) with the library as it was at `ref`, in a temporary
    `git worktree` removed afterwards."""
    with private_directory("terravixens-review-") as scratch:
        tree = scratch / "base"
        added = git(root, "worktree", "add", "--detach", "--quiet", str(tree), ref)
        if added.returncode != 0:
            raise OperationError(
                f"git worktree add {ref} failed: {(added.stderr.strip() or added.reason)[:300]}", ExitCode.BAD_INPUT
            )
        try:
            if not (tree / site).is_file():
                raise OperationError(
                    f"{site} does not exist at {ref}: review a site file tracked at both ends", ExitCode.BAD_INPUT
                )
            link_bindings(tree)
            return finish_synth(start_synth(tree, tree / site, outdir, root), f"at {ref}", outdir)
        finally:
            git(root, "worktree", "remove", "--force", str(tree))


def site_document(text: str, where: str) -> dict[str, Any]:
    try:
        data, _ = load_yaml(text, where, what="site file")
    except InputError as error:
        raise OperationError(str(error), ExitCode.BAD_INPUT) from None
    return data if isinstance(data, dict) else {}


@dataclass
class Row:
    stack: str
    owner: str
    address: str
    change: str
    attributes: list[str]
    flagged: bool


def rows(changes: dict[str, Changes], named: Named | None) -> list[Row]:
    found = []
    for stack, change in changes.items():
        for kind, addresses in (("added", change.added), ("removed", change.removed), ("changed", change.changed)):
            for address in sorted(addresses):
                name = address.split(".")[-1] if not address.startswith("output.") else address
                node = owner_of(name)
                flagged = named is not None and node is not None and node not in named.nodes
                found.append(Row(stack, owner(name), address, kind, change.attributes.get(address, []), flagged))
    return sorted(found, key=lambda r: (r.stack, not r.flagged, r.owner, r.address))


def touched(site: Site, found: list[Row]) -> tuple[dict[str, str], list[str]]:
    """What the rows touch, as show's graph keys (terravixens.operations.show.keys) -> `touched` or `flagged`, and
    the owners the working tree's site no longer has (a removed node: in no picture of it).

    A row's stack says which layer, and for a node which cluster (two clusters may both have a `cp-a`)."""
    shown = view(site)
    cluster_of = {layer.name: layer.cluster for layer in shown.layers}
    drawn = keys(shown)
    marked: dict[str, str] = {}
    missing: set[str] = set()
    for row in found:
        kind, _, name = row.owner.partition(" ")
        key = {
            "node": node_key(cluster_of.get(row.stack) or "", name),
            "standalone": guest_key(name),
            "hypervisor": hypervisor_key(name),
        }.get(kind)
        for one in (layer_key(row.stack), key):
            if one is None:
                continue
            if one not in drawn:
                missing.add(row.owner if one == key else f"layer {row.stack}")
            elif marked.get(one) != "flagged":
                marked[one] = "flagged" if row.flagged and one == key else "touched"
    return marked, sorted(missing)


def picture(site: Site, found: list[Row]) -> list[str]:
    """The blast radius as Markdown lines: a mermaid block of the site, what the change touches highlighted."""
    marked, missing = touched(site, found)
    lines = [
        "### Blast radius",
        "",
        "Highlighted: what the change touches (`flagged`: a node it does not name); plain: untouched.",
        "",
        "```mermaid",
        *mermaid(view(site), marked).splitlines(),
        "```",
        "",
    ]
    if missing:
        lines += [f"Not in the working tree's site (removed): {', '.join(missing)}.", ""]
    return lines


def markdown(title: str, named: Named | None, found: list[Row], site: Site | None = None) -> str:
    lines = [f"## terravixens review: {title}", ""]
    if named is not None:
        lines += [f"The change names: {named.describe()}.", ""]
    flagged = [row for row in found if row.flagged]
    if flagged:
        nodes = sorted({row.owner.removeprefix("node ") for row in flagged})
        lines += [
            (
                f"> **⚠ {len(flagged)} address{'es' if len(flagged) != 1 else ''} of nodes the change does not "
                f"name: {', '.join(nodes)}.** A change to one node must never touch another: find out why."
            ),
            "",
        ]
    if site is not None:
        lines += picture(site, found)
    if not found:
        lines.append("No stack changes.")
    for stack in sorted({row.stack for row in found}):
        stack_rows = [row for row in found if row.stack == stack]
        counts = {kind: sum(1 for row in stack_rows if row.change == kind) for kind in ("added", "removed", "changed")}
        lines += [
            f"### `{stack}` — {', '.join(f'{n} {k}' for k, n in counts.items() if n)}",
            "",
            "| | owner | address | change | attributes |",
            "|---|---|---|---|---|",
        ]
        for row in stack_rows[:ROW_LIMIT]:
            attributes = ", ".join(f"`{a}`" for a in row.attributes[:6]) + (" …" if len(row.attributes) > 6 else "")
            lines.append(
                f"|{' ⚠ ' if row.flagged else ' '}| {row.owner} | `{row.address}` | {row.change} | {attributes} |"
            )
        if len(stack_rows) > ROW_LIMIT:
            lines.append(f"| | | … {len(stack_rows) - ROW_LIMIT} more | | |")
        lines.append("")
    return "\n".join(lines)


@dataclass
class Review:
    """What a change does: the Markdown (`text`), the number of flagged addresses, and the rows it is made of (the
    `terravixens/review/v1` document lists them). `strict`: flagged addresses make it REFUSED (`--strict`)."""

    text: str
    flagged: int
    rows: list[Row] = field(default_factory=list)
    named: str | None = None
    strict: bool = False
    command: str = "review"

    @property
    def exit_code(self) -> int:
        return ExitCode.REFUSED if self.strict and self.flagged else ExitCode.OK

    def lines(self) -> list[str]:
        return [self.text]

    def notes(self) -> list[str]:
        return []

    def body(self) -> dict[str, Any]:
        return {
            "named": self.named,
            "flagged": self.flagged,
            "strict": self.strict,
            "exit_code": int(self.exit_code),
            "changes": [
                {
                    "stack": row.stack,
                    "owner": row.owner,
                    "address": row.address,
                    "change": row.change,
                    "attributes": row.attributes,
                    "flagged": row.flagged,
                }
                for row in self.rows
            ],
            "markdown": self.text,
        }


def review_ref(root: Path, base: str, site: str) -> Review:
    """BASE (a git ref) against the working tree, for the site file at `site` (relative to the repository)."""
    root = root.resolve()
    site_path = Path(site)
    relative = str(site_path.resolve().relative_to(root)) if site_path.is_absolute() else site
    shown = git(root, "show", f"{base}:{relative}")
    if shown.returncode != 0:
        raise OperationError(
            f"{relative} is not tracked at {base}: {(shown.stderr.strip() or shown.reason)[:200]}", ExitCode.BAD_INPUT
        )
    try:
        current = read_text(root / relative, limit=1024 * 1024, what="site file")
    except InputError as error:
        raise OperationError(str(error), ExitCode.BAD_INPUT) from None
    named = named_by_change(site_document(shown.stdout, f"{base}:{relative}"), site_document(current, relative))
    with private_directory("terravixens-review-out-") as scratch:
        # Both synths at once: each is mostly the jsii runtime starting, one core each.
        working = start_synth(root, root / relative, scratch / "after")
        try:
            before = synth_at(root, base, relative, scratch / "before")
        finally:
            after_error = None
            after: dict[str, dict[str, Any]] = {}
            try:
                after = finish_synth(working, "of the working tree", scratch / "after")
            except OperationError as error:
                after_error = error
        if after_error is not None:
            raise after_error
    found = rows(diff(before, after), named)
    try:  # the working tree's synth just read it: a site that fails here changed under us
        site_now: Site | None = load_site(root / relative)
    except SiteError as error:
        raise OperationError(str(error), ExitCode.BAD_INPUT) from None
    title = f"`{base}` → working tree (`{relative}`)"
    return Review(markdown(title, named, found, site_now), sum(r.flagged for r in found), found, named.describe())


def review_dirs(before: Path, after: Path, site: Site | None = None) -> Review:
    """Two cdktf.out directories; with `site` (the one `after` was synthesized from), the blast radius too."""
    found = rows(diff(read_stacks(before), read_stacks(after)), None)
    return Review(markdown(f"`{before}` → `{after}`", None, found, site), 0, found)


# ------------------------------------------------------------------------------------------------- command line
def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("base", nargs="?", help="git ref to compare the working tree with (e.g. origin/main)")
    site_option(parser, "site file, relative to the repository (default: $TERRAVIXENS_SITE or sites/example.yaml)")
    parser.add_argument("--before", help="compare two cdktf.out directories instead: the old one")
    parser.add_argument("--after", help="the new cdktf.out directory")
    parser.add_argument("--output", help="also write the Markdown to this new file (never overwritten)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when an address of an unnamed node changes")
    json_option(parser, " (terravixens/review/v1: every changed address, and the Markdown)")


def command(args: argparse.Namespace) -> int:
    if args.output:  # before two synths: an output that cannot be written costs nothing
        require_new_file(Path(args.output), "--output")
    if args.before or args.after:
        if not (args.before and args.after) or args.base:
            raise OperationError("give BASE, or both --before and --after", ExitCode.BAD_INPUT)
        result = review_dirs(Path(args.before), Path(args.after))
    else:
        if not args.base:
            raise OperationError("give BASE (a git ref), or --before DIR --after DIR", ExitCode.BAD_INPUT)
        result = review_ref(Path.cwd(), args.base, args.site or os.environ.get(SITE_ENV) or str(DEFAULT_SITE))
    if args.output:
        write_new(Path(args.output), result.text + "\n", "--output", private=False)
    return render(replace(result, strict=args.strict), args.json)


REVIEW = Definition(
    arguments,
    command,
    codes(
        (ExitCode.OK, "the Markdown is printed (and written to --output)"),
        (
            ExitCode.REFUSED,
            ("with --strict: an address of a node the change does not name changes; or a safety rule stopped a synth"),
        ),
        (ExitCode.BAD_INPUT, "no BASE, unknown ref, a synth that fails, or --output names an existing file"),
        ExitCode.INTERRUPTED,
    ),
    examples=(
        "terravixens review origin/main",
        "terravixens review --before old/cdktf.out --after cdktf.out --json",
    ),
)


__all__ = [
    "REVIEW",
    "Named",
    "Review",
    "arguments",
    "command",
    "named_by_change",
    "picture",
    "review_dirs",
    "review_ref",
    "rows",
    "touched",
]
