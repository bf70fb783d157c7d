"""`terravixens spec get`, on a node: fetch its spec from the server, verify it, write it (terravixens.specclient,
standard library only; this module is the command line's side of it)."""

from __future__ import annotations

import argparse
from pathlib import Path

from terravixens.arguments import Definition, seconds
from terravixens.exitcodes import SpecGetExit, codes


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--env-file", help="default: $TERRAVIXENS_NODE_ENV or /etc/terravixens/node.env")
    parser.add_argument("--out", default="/var/lib/terravixens/spec.json", help="where the spec is written (0600)")
    parser.add_argument(
        "--max-time", type=seconds(0.1), default=120.0, help="give up after this many seconds (default 120)"
    )
    parser.add_argument(
        "--attempt-timeout",
        type=seconds(0.1),
        default=10.0,
        help="seconds per attempt, wall clock: connect, TLS and the whole answer (default 10)",
    )


def command(args: argparse.Namespace) -> int:
    from terravixens.specclient.get import GetOptions, run

    return run(
        GetOptions(
            env_file=args.env_file and Path(args.env_file),
            out=Path(args.out),
            budget=args.max_time,
            attempt_timeout=args.attempt_timeout,
        )
    )


SPEC_GET = Definition(
    arguments,
    command,
    codes(*SpecGetExit),
    examples=("terravixens spec get --env-file /etc/terravixens/node.env",),
)

__all__ = ["SPEC_GET", "arguments", "command"]
