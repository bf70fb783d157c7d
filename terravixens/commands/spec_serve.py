"""`terravixens spec serve`: serve each standalone node its resolved spec (terravixens.specserver). The server's
packages are an optional extra (`serve`): without them the command says how to add them."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from terravixens.arguments import Definition, seconds, site_option, whole
from terravixens.exitcodes import ExitCode, codes


def arguments(parser: argparse.ArgumentParser) -> None:
    site_option(parser)
    parser.add_argument("--secrets", help="secrets file, mode 0600 (default: $TERRAVIXENS_SECRETS)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8443, help="port (default 8443; 0 picks a free one)")
    parser.add_argument("--tls-cert", help="PEM certificate (chain): serve https")
    parser.add_argument("--tls-key", help="PEM private key of --tls-cert")
    parser.add_argument(
        "--watch-interval",
        type=seconds(0.0),
        default=2.0,
        help="seconds between checks for changed files (0: reload on SIGHUP only)",
    )
    parser.add_argument(
        "--header-timeout",
        type=seconds(0.1, 600.0),
        default=10.0,
        help="seconds a client has to send its request headers (default 10)",
    )
    parser.add_argument(
        "--max-connections-per-client",
        type=whole(1, "number of connections"),
        default=16,
        help="open connections one client address may hold; more are closed at once (default 16)",
    )


def command(args: argparse.Namespace) -> int:
    from terravixens.config.loader import DEFAULT_SITE, SITE_ENV
    from terravixens.standalone.secrets import SECRETS_ENV

    try:
        from terravixens.specserver.server import ServeOptions, serve
    except ModuleNotFoundError as error:  # the `serve` extra (pyproject.toml) is optional: say how to add it
        missing = (error.name or "").partition(".")[0]
        if missing not in ("starlette", "uvicorn", "httptools"):
            raise
        print(f"spec serve: {missing} is not installed: pip install 'terravixens[serve]'", file=sys.stderr)
        return ExitCode.BAD_INPUT

    secrets = args.secrets or os.environ.get(SECRETS_ENV)
    if not secrets:
        print(f"spec serve: give the secrets file (--secrets FILE or ${SECRETS_ENV})", file=sys.stderr)
        return ExitCode.BAD_INPUT
    return serve(
        ServeOptions(
            site=Path(args.site or os.environ.get(SITE_ENV) or DEFAULT_SITE),
            secrets=Path(secrets),
            host=args.host,
            port=args.port,
            tls_cert=args.tls_cert and Path(args.tls_cert),
            tls_key=args.tls_key and Path(args.tls_key),
            watch_interval=args.watch_interval,
            header_timeout=args.header_timeout,
            max_connections_per_client=args.max_connections_per_client,
        )
    )


SPEC_SERVE = Definition(
    arguments,
    command,
    codes(
        (ExitCode.BAD_INPUT, "site, specs, secrets, TLS files or address unusable: it does not start"),
        (
            ExitCode.INTERRUPTED,
            (
                "stopped with Ctrl-C, its normal end (SIGTERM: a graceful stop, then the process "
                "ends by that signal, as systemd expects)"
            ),
        ),
    ),
    examples=("terravixens spec serve --secrets secrets.yaml --tls-cert server.pem --tls-key server.key",),
)

__all__ = ["SPEC_SERVE", "arguments", "command"]
