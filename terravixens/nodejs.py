"""Which Node.js runs jsii under terravixens' own synth: the project's Node.js 22 (node_modules/.bin/node), not
whatever `node` comes first on PATH.

Every synth starts a Node.js process for jsii (the cdktf runtime). With an older system Node first on PATH (Node 20
here), jsii printed its end-of-life banner on every command, as Python `b'…'` lines; under Node 22 its one use of
util.isArray prints DEP0044. `make`, bin/terravixens and bin/cdktf put the project's Node first and silence DEP0044
(scripts/node-env.sh); this gives the same to `.venv/bin/terravixens` and `pipenv run terravixens` run directly.
Standard library only; nothing is changed when JSII_NODE is already set or no project Node is found.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

QUIET = "--disable-warning=DEP0044"
CHECKOUT = Path(__file__).resolve().parent.parent


def project_node(cwd: Path, checkout: Path = CHECKOUT) -> Path | None:
    """node_modules/.bin/node of the current folder (a site repository with its own toolchain), else of the
    checkout this package runs from (an editable install); None when neither has one (an installed wheel)."""
    for folder in (cwd, checkout):
        candidate = folder / "node_modules" / ".bin" / "node"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def jsii_environment(env: Mapping[str, str], cwd: Path, checkout: Path = CHECKOUT) -> dict[str, str]:
    """The variables to set so jsii runs the project's Node quietly: JSII_NODE, and NODE_OPTIONS with DEP0044
    silenced (what is already in NODE_OPTIONS stays). Empty when JSII_NODE is set or there is no project Node."""
    if env.get("JSII_NODE"):
        return {}
    node = project_node(cwd, checkout)
    if node is None:
        return {}
    options = env.get("NODE_OPTIONS", "")
    if QUIET not in options.split():
        options = f"{options} {QUIET}".strip()
    return {"JSII_NODE": str(node), "NODE_OPTIONS": options}
