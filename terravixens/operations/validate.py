"""`terravixens validate`: a site file and, when it has standalone nodes, their specs; one summary line when ok.

The verdict is a value (ValidateReport): the command line prints it as text (the summary on stdout, the problems on
stderr) or as the `terravixens/validate/v1` document (terravixens.output)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from terravixens.arguments import Definition, json_option, site_argument, site_from_positional
from terravixens.config.loader import SiteError, load_checked, warnings
from terravixens.config.model import Site
from terravixens.exitcodes import ExitCode, codes
from terravixens.inputs import InputError, Problem
from terravixens.output import render


@dataclass(frozen=True)
class ValidateReport:
    """A site file's verdict: its counts when it loaded, and every problem (of the site file, or of a standalone
    spec) with its file, field, line and message (which says the fix); as text, the problems go to stderr as the
    loaders print them."""

    site_file: str
    site: Site | None = None
    errors: Sequence[InputError] = field(default_factory=tuple)
    warnings: Sequence[Problem] = field(default_factory=tuple)  # the site rules' cautions: the site is still valid
    command: str = "validate"

    @property
    def exit_code(self) -> int:
        return ExitCode.BAD_INPUT if self.errors else ExitCode.OK

    def counts(self) -> dict[str, int]:
        site = self.site
        if site is None:
            return {}
        return {
            "hypervisors": len(site.hypervisors),
            "clusters": len(site.clusters),
            "nodes": sum(len(cluster.nodes()) for cluster in site.clusters.values()),
            "standalone_nodes": len(site.standalone.nodes),
        }

    def notes(self) -> list[str]:
        found = [str(error) for error in self.errors]
        if self.warnings:
            count = len(self.warnings)
            found.append(f"{self.site_file}: {count} warning{'s' if count != 1 else ''} in the site file")
            found += [f"  - {problem}" for problem in self.warnings]
        return found

    def lines(self) -> list[str]:
        if self.errors or self.site is None:
            return []
        counts = self.counts()
        standalone = f", {counts['standalone_nodes']} standalone nodes" if counts["standalone_nodes"] else ""
        summary = (
            f"site {self.site.site!r}, {counts['hypervisors']} hypervisors, {counts['clusters']} clusters, "
            f"{counts['nodes']} nodes{standalone}"
        )
        return [f"{self.site_file}: ok — {summary}"]

    def body(self) -> Mapping[str, Any]:
        return {
            "site_file": self.site_file,
            "valid": not self.errors,
            "site": self.site.site if self.site else None,
            "counts": self.counts() or None,
            "problems": [
                {"file": error.path, "field": p.field, "line": p.line, "message": p.message}
                for error in self.errors
                for p in error.problems
            ],
            "warnings": [
                {"file": self.site_file, "field": p.field, "line": p.line, "message": p.message} for p in self.warnings
            ],
        }


def validate_report(site: Site, site_path: str | None, cautions: Sequence[Problem] | None = None) -> ValidateReport:
    """The report of a site that loaded (the loader already checked it): its standalone specs are read too, and the
    site rules' warnings (`cautions`, located by the loader; computed from the site, without lines, when not given)
    are said."""
    errors: list[InputError] = []
    if site.standalone.nodes:
        from terravixens.standalone.validate import site_spec_errors

        errors = site_spec_errors(site_path)
    found = tuple(warnings(site) if cautions is None else cautions)
    return ValidateReport(site_path or "site", site, tuple(errors), found)


def validate(site: Site, site_path: str | None, out: TextIO, err: TextIO) -> int:
    """OK and a summary on `out` when the site (already loaded and checked) and its standalone specs are sound;
    BAD_INPUT and every spec problem on `err` otherwise."""
    return render(validate_report(site, site_path), False, out, err)


# ------------------------------------------------------------------------------------------------- command line
def arguments(parser: argparse.ArgumentParser) -> None:
    site_argument(parser)
    json_option(parser, " (terravixens/validate/v1: counts, or every problem)")


def command(args: argparse.Namespace) -> int:
    """`terravixens validate`: it loads the site itself, because with --json a site that does not load is a document
    too (its problems), not only text."""
    if not site_from_positional(args, "validate"):
        return ExitCode.BAD_INPUT
    try:
        site, cautions = load_checked(args.site)
    except SiteError as error:
        return render(ValidateReport(str(args.site or error.path), None, (error,)), args.json)
    return render(validate_report(site, args.site, cautions), args.json)


VALIDATE = Definition(
    arguments,
    command,
    codes(
        (ExitCode.OK, "the site is valid; what the site rules warn about, if anything, is printed on stderr"),
        (ExitCode.BAD_INPUT, "the site file (or a standalone spec) has problems: every one printed"),
        ExitCode.INTERRUPTED,
    ),
    examples=(
        "terravixens validate --site sites/example.yaml",
        "terravixens validate --site sites/example.yaml --json",
    ),
)


__all__ = ["VALIDATE", "ValidateReport", "arguments", "command", "validate", "validate_report"]
