"""Running `terravixens check` in process against tests/cluster_fakes.py's cluster, and reading what it printed
(tests/test_check.py, tests/test_gitops_judges.py)."""

from __future__ import annotations

import io
from dataclasses import dataclass

from terravixens.operations.check import CheckCommand, check
from terravixens.operations.console import Console
from terravixens.operations.workspace import Workspace
from tests.cluster_fakes import Cluster


@dataclass
class Ran:
    code: int
    text: str

    @property
    def lines(self) -> list[str]:
        return self.text.splitlines()

    def status(self) -> dict[str, str]:
        """check -> ok | problem | not checked, from the printed lines."""
        found: dict[str, str] = {}
        for line in self.lines[:-1]:
            name, _, rest = line.partition(": ")
            found[name] = "problem" if found.get(name) == "problem" else rest.split(" — ")[0]
        return found


def run(cluster: Cluster, tf=None, *, json_output: bool = False, **options) -> Ran:
    out = io.StringIO()
    ws = Workspace(cluster.site, root=cluster.folder)
    code = check(
        ws, "prod", tf, cluster.options(**options), Console(out=out), CheckCommand(json=json_output), cluster.kubectl()
    )
    return Ran(int(code), out.getvalue())
