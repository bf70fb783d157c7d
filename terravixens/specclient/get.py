"""`terravixens spec get`: fetch this node's spec and write it atomically, readable by its owner only.

Exit codes: its own table, terravixens.exitcodes.SpecGetExit (which side to fix: options, network, credentials,
server, disk), printed by `terravixens spec get --help` and in docs/commands.md.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from terravixens.exitcodes import SpecGetExit
from terravixens.inputs import InputError, load_json
from terravixens.specclient import envfile
from terravixens.specclient.fetch import Answer, Permanent, request_once, with_retries

DEFAULT_OUT = Path("/var/lib/terravixens/spec.json")
SCHEMA_VERSION = 1
# Its own table (terravixens.exitcodes.SpecGetExit), under the names this module has always used.
OK, USAGE, UNREACHABLE, REFUSED = SpecGetExit.OK, SpecGetExit.USAGE, SpecGetExit.UNREACHABLE, SpecGetExit.REFUSED
UNKNOWN, UNVERIFIED, UNWRITABLE = SpecGetExit.UNKNOWN, SpecGetExit.UNVERIFIED, SpecGetExit.UNWRITABLE


@dataclass(frozen=True)
class GetOptions:
    env_file: Path | None = None
    out: Path = DEFAULT_OUT
    budget: float = 120.0
    attempt_timeout: float = 10.0


def verify(answer: Answer, identity: str) -> dict[str, Any]:
    try:
        document = load_json(answer.body.decode("utf-8"), "response", what="spec")
    except (InputError, UnicodeDecodeError) as error:
        raise Permanent("protocol", f"the answer is not a JSON spec ({str(error).splitlines()[-1].strip()})") from None
    if not isinstance(document, dict) or document.get("schema_version") != SCHEMA_VERSION:
        got = document.get("schema_version") if isinstance(document, dict) else None
        raise Permanent(
            "protocol",
            f"the answer has schema_version {got!r}, this client reads {SCHEMA_VERSION}: "
            f"update terravixens on the node or the server",
        )
    name = (document.get("identity") or {}).get("name") if isinstance(document.get("identity"), dict) else None
    if name != identity:
        raise Permanent(
            "protocol", f"the answer is the spec of {str(name)[:64]!r}, not of {identity!r}: check the server URL"
        )
    return document


def write_atomically(path: Path, data: bytes) -> None:
    """Temp file in the same folder (0600 from creation), fsync, rename over the target, fsync the folder: a reader
    sees the old spec or the new one, never a part, and never a moment when others could read it."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


@dataclass(frozen=True)
class Fetched:
    """A verified spec (`code` OK, its bytes and identity), or the exit code of why there is none (already said)."""

    code: SpecGetExit
    body: bytes = b""
    identity: str = ""


def _say(line: str) -> None:
    print(f"spec get: {line}", file=sys.stderr)


def fetch(options: GetOptions, *, request: Callable[..., Answer] = request_once, **retry: Any) -> Fetched:
    """The node's spec, fetched and verified, in memory: nothing is written (the agent writes it itself, without
    following a link, or not at all in a dry run)."""
    try:
        env = envfile.load(options.env_file)
    except InputError as error:
        print(error, file=sys.stderr)
        return Fetched(USAGE)
    try:
        answer = with_retries(
            lambda timeout: request(env.server, env.identity, env.token, env.ca_file, timeout, env.ca_pem),
            budget=options.budget,
            attempt_timeout=options.attempt_timeout,
            report=_say,
            **retry,
        )
        if answer is None:
            _say(f"gave up: {env.server} did not answer within {options.budget:g} s")
            return Fetched(UNREACHABLE)
        if answer.status in (401, 403):
            _say(f"refused ({answer.status}): check TERRAVIXENS_TOKEN against the node's posture on the server")
            return Fetched(REFUSED)
        if answer.status == 404:
            _say(f"the server does not know identity {env.identity!r}: check TERRAVIXENS_IDENTITY and the site file")
            return Fetched(UNKNOWN)
        if answer.status != 200:
            _say(f"unexpected answer HTTP {answer.status}")
            return Fetched(UNVERIFIED)
        verify(answer, env.identity)
    except Permanent as error:
        _say(str(error))
        return Fetched(UNVERIFIED)
    return Fetched(OK, answer.body, env.identity)


def run(options: GetOptions, *, request: Callable[..., Answer] = request_once, **retry: Any) -> int:
    fetched = fetch(options, request=request, **retry)
    if fetched.code != OK:
        return fetched.code
    try:
        write_atomically(options.out, fetched.body)
    except OSError as error:
        _say(f"cannot write {options.out} ({error.strerror})")
        return UNWRITABLE
    print(f"{options.out}: spec of {fetched.identity!r} written ({len(fetched.body):,} bytes)")
    return OK
