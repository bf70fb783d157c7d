"""`python3 -m terravixens.agent`: converge (a spec given) or run (fetch, then converge). Output: one line per change
and a summary on stdout, or the JSON result alone with --json (what `spec push` and `spec handoff` read back).

Exit codes: 0 done (changed or not), 2 bad option, spec or root (nothing changed), 3–7 the fetch failed as `spec
get` says (terravixens.exitcodes.SpecGetExit; nothing changed), 8 a section failed (the JSON says which; the others
are applied).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

from terravixens.agent import desired
from terravixens.agent.converge import Result, converge
from terravixens.agent.system import Node, Unusable
from terravixens.exitcodes import SpecGetExit
from terravixens.specclient import get

# 0 and 2 as `spec get` (its table: the run's fetch codes pass through), then the agent's own code past its 3–7.
OK, USAGE = SpecGetExit.OK, SpecGetExit.USAGE
SECTION_FAILED = 8
SPEC_PATH = "/var/lib/terravixens/spec.json"
FIRST_BOOT = "/var/lib/terravixens/first-boot.json"
SPEC_LIMIT = 1024 * 1024


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python3 -m terravixens.agent", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name, text in (("converge", "apply a resolved spec (a file, or - for stdin)"), ("run", "fetch, then converge")):
        sub = commands.add_parser(name, help=text)
        sub.add_argument("--dry-run", action="store_true", help="print what would change; change nothing")
        sub.add_argument("--json", action="store_true", help="print the JSON result only")
        sub.add_argument("--record", help="also write the JSON result to this node path (0600)")
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


def _read_spec(source: str) -> dict:
    try:
        text = sys.stdin.read(SPEC_LIMIT + 1) if source == "-" else Path(source).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise desired.BadSpec(f"cannot read the spec {source}: {getattr(error, 'strerror', None) or error}") from None
    if len(text) > SPEC_LIMIT:
        raise desired.BadSpec(f"the spec {source} is larger than {SPEC_LIMIT:,} bytes: give the resolved spec")
    try:
        return json.loads(text)
    except ValueError as error:
        raise desired.BadSpec(f"the spec {source} is not JSON ({error}): give the resolved spec") from None


def _report(node: Node, result: Result, args: argparse.Namespace) -> int:
    document = result.document()
    if args.record:
        node.write(args.record, json.dumps(document, indent=1) + "\n", 0o600)
    if args.json:
        print(json.dumps(document))
    else:
        print("\n".join(result.lines()))
    return OK if result.ok else SECTION_FAILED


def _fetch(node: Node, args: argparse.Namespace) -> int:
    env_file = Path(args.env_file) if args.env_file else node.path(get.envfile.DEFAULT_PATH.as_posix())
    options = get.GetOptions(env_file=env_file, out=node.path(SPEC_PATH), budget=args.budget)
    with contextlib.redirect_stdout(sys.stderr):  # stdout is the result's alone
        return get.run(options)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        node = Node.at(args.root, args.tools)
    except Unusable as error:
        _say(str(error))
        return USAGE
    if args.command == "run":
        if args.first_boot and _first_boot_done(node):
            _say(f"first boot already converged ({FIRST_BOOT}): nothing to do")
            if args.json:
                print(node.read(FIRST_BOOT) or "{}")
            return OK
        fetched = _fetch(node, args)
        if fetched != SpecGetExit.OK:
            _say(f"the spec could not be fetched (spec get exit {int(fetched)}): nothing changed")
            return int(fetched)
        source = str(node.path(SPEC_PATH))
        if args.first_boot and not args.record:
            args.record = FIRST_BOOT
    else:
        source = args.spec
    try:
        want = desired.read(_read_spec(source))
    except desired.BadSpec as error:
        _say(f"{error} (nothing changed)")
        return USAGE
    return _report(node, converge(node, want, dry_run=args.dry_run), args)


def _first_boot_done(node: Node) -> bool:
    try:
        return json.loads(node.read(FIRST_BOOT) or "{}").get("ok") is True
    except (ValueError, AttributeError):
        return False
