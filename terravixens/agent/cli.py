"""`python3 -m terravixens.agent`: converge (a spec given) or run (fetch, then converge). Output: one line per change
and a summary on stdout, or the JSON result alone with --json (what `spec push` and `spec handoff` read back).

Exit codes: 0 done (changed or not), 2 bad option, spec or root (nothing changed), 3–7 the fetch failed as `spec
get` says (terravixens.exitcodes.SpecGetExit; nothing changed), 8 a section failed (the JSON says which; the others
are applied).

`--dry-run` writes nothing at all: `run --dry-run` keeps the fetched spec in memory (spec.json is not replaced) and
`--record` is not written (stderr says so; the result is on stdout). `--record` is a node path: absolute, without
`.` or `..`, written under the root without following a link (ADR 0052); anything else is refused before anything
is done.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

from terravixens.agent import desired
from terravixens.agent.converge import Result, converge
from terravixens.agent.system import Node, Refused, Unusable, node_parts
from terravixens.exitcodes import SpecGetExit
from terravixens.inputs import InputError, load_json, read_text
from terravixens.specclient import envfile, get

# 0 and 2 as `spec get` (its table: the run's fetch codes pass through), then the agent's own code past its 3–7.
OK, USAGE = SpecGetExit.OK, SpecGetExit.USAGE
SECTION_FAILED = 8
SPEC_PATH = "/var/lib/terravixens/spec.json"
FIRST_BOOT = "/var/lib/terravixens/first-boot.json"
SPEC_LIMIT = 1024 * 1024
SPEC_DEPTH = 32  # a resolved spec is 4 levels deep; anything near this is not one


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python3 -m terravixens.agent", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name, text in (("converge", "apply a resolved spec (a file, or - for stdin)"), ("run", "fetch, then converge")):
        sub = commands.add_parser(name, help=text)
        sub.add_argument("--dry-run", action="store_true", help="print what would change; change nothing")
        sub.add_argument("--json", action="store_true", help="print the JSON result only")
        sub.add_argument(
            "--record",
            help="also write the JSON result to this node path (absolute, under the root, 0600; not with --dry-run)",
        )
        sub.add_argument("--root", help="the node's root (default /; anything else needs --tools)")
        sub.add_argument("--tools", help="a folder of stand-ins for the managers (tests)")
        if name == "converge":
            sub.add_argument("--spec", required=True, help="the resolved spec, JSON (- reads stdin)")
        else:
            sub.add_argument("--env-file", help="node.env (default /etc/terravixens/node.env under the root)")
            sub.add_argument("--budget", type=float, default=120.0, help="seconds for the fetch, retries included")
            sub.add_argument(
                "--first-boot",
                action="store_true",
                help=f"once: nothing to do when {FIRST_BOOT} records a successful run (cloud-init runcmd)",
            )
    return parser


def _say(line: str) -> None:
    print(f"agent: {line}", file=sys.stderr)


def _problem(error: InputError) -> str:
    """The reader's first problem in one line (it has one: each of its failures is one located problem)."""
    problem = error.problems[0]
    return problem.message if problem.line is None else str(problem)


def _spec(text: str, source: str) -> object:
    """The resolved spec's JSON, strictly: duplicate keys refused (never last-wins), depth and numbers bounded."""
    try:
        return load_json(text, source, what="spec", max_depth=SPEC_DEPTH)
    except InputError as error:
        raise desired.BadSpec(f"the spec {source}: {_problem(error)}") from None


def _read_spec(source: str) -> object:
    """A file (a regular file only, at most SPEC_LIMIT bytes) or stdin (`-`)."""
    try:
        text = read_text(source, limit=SPEC_LIMIT, what="spec")
    except InputError as error:
        raise desired.BadSpec(f"the spec {source}: {_problem(error)}") from None
    return _spec(text, source)


def _report(node: Node, result: Result, args: argparse.Namespace) -> int:
    document = result.document()
    if args.record and args.dry_run:
        _say(f"--dry-run: the record {args.record} is not written (a dry run writes nothing)")
    elif args.record:
        try:
            node.write(args.record, json.dumps(document, indent=1) + "\n", 0o600)
        except (Refused, OSError) as error:
            _say(f"the record {args.record} is not written: {getattr(error, 'strerror', None) or error}")
    if args.json:
        print(json.dumps(document))
    else:
        print("\n".join(result.lines()))
    return OK if result.ok else SECTION_FAILED


def _fetch(node: Node, args: argparse.Namespace) -> tuple[int, object]:
    """spec get's fetch, then the spec written to SPEC_PATH without following a link (not in a dry run)."""
    env_file = Path(args.env_file) if args.env_file else node.path(envfile.DEFAULT_PATH.as_posix())
    options = get.GetOptions(env_file=env_file, out=Path(SPEC_PATH), budget=args.budget)
    with contextlib.redirect_stdout(sys.stderr):  # stdout is the result's alone
        fetched = get.fetch(options)
    if fetched.code != SpecGetExit.OK:
        return int(fetched.code), None
    size = f"{len(fetched.body):,} bytes"
    if args.dry_run:
        _say(f"spec of {fetched.identity!r} fetched ({size}); --dry-run: {SPEC_PATH} is not written")
    else:
        try:
            node.write(SPEC_PATH, fetched.body, 0o600)
        except (Refused, OSError) as error:
            _say(f"cannot write {SPEC_PATH} ({getattr(error, 'strerror', None) or error})")
            return int(SpecGetExit.UNWRITABLE), None
        print(f"{SPEC_PATH}: spec of {fetched.identity!r} written ({size})", file=sys.stderr)
    try:
        text = fetched.body.decode("utf-8")
    except UnicodeDecodeError:
        raise desired.BadSpec(f"the spec of {fetched.identity!r} is not UTF-8: fetch it again") from None
    return int(SpecGetExit.OK), _spec(text, SPEC_PATH)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        node = Node.at(args.root, args.tools)
        if args.record:
            node_parts(args.record)
    except Unusable as error:
        _say(str(error))
        return USAGE
    except Refused as error:
        _say(f"--record: {error} (nothing changed)")
        return USAGE
    try:
        return _main(node, args)
    except desired.BadSpec as error:
        _say(f"{error} (nothing changed)")
        return USAGE
    except Refused as error:
        _say(str(error))
        return USAGE


def _main(node: Node, args: argparse.Namespace) -> int:
    if args.command == "run":
        if args.first_boot and _first_boot_done(node):
            _say(f"first boot already converged ({FIRST_BOOT}): nothing to do")
            if args.json:
                print(node.read(FIRST_BOOT) or "{}")
            return OK
        fetched, document = _fetch(node, args)
        if fetched != SpecGetExit.OK:
            _say(f"the spec could not be fetched (spec get exit {fetched}): nothing changed")
            return fetched
        if args.first_boot and not args.record:
            args.record = FIRST_BOOT
    else:
        document = _read_spec(args.spec)
    want = desired.read(document)
    return _report(node, converge(node, want, dry_run=args.dry_run), args)


def _first_boot_done(node: Node) -> bool:
    try:
        return json.loads(node.read(FIRST_BOOT) or "{}").get("ok") is True
    except (ValueError, AttributeError):
        return False
