"""`terravixens plan-guard PLAN`: the guard on a plan saved by hand (`terraform show -json PLANFILE`), with what it
needs besides the plan: the site file (roles; what the site's nodes want from L0), the platform layers' deployed
states (what VMs use), and the plan's log (`terraform plan -json`, for the reboot checks). `terravixens deploy`
gathers all of that itself."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TextIO

from terravixens.arguments import Definition, allow_reboot_option, json_option, site_option
from terravixens.config.model import Site
from terravixens.exitcodes import ExitCode, codes
from terravixens.guard import (
    GuardContext,
    RebootChecks,
    check_plan,
    deployed_usage,
    explain,
    ok_line,
    refusals,
    site_roles,
    site_usage,
)
from terravixens.guard.checks.base import Violation
from terravixens.guard.context import AmbiguousRoles
from terravixens.guard.plan import PLAN_LIMIT, load_plan_file
from terravixens.inputs import InputError, Problem, load_json, read_text
from terravixens.layers import layer_named
from terravixens.operations.outcome import OperationError
from terravixens.output import render


@dataclass(frozen=True)
class GuardOptions:
    plan: str
    layer: str | None = None
    allow_reboot: frozenset[str] = frozenset()
    plan_log: str | None = None
    deployed_states: tuple[str, ...] = ()
    teardown: bool = False
    limit: int = PLAN_LIMIT


def read_plan_log(path: str, limit: int) -> RebootChecks:
    """`terraform plan -json` output: one JSON message per line."""
    text = read_text(path, limit=limit, what="plan log")
    messages = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            message = load_json(line, f"{path}:{number}", what="plan log")
            if not isinstance(message, dict):
                raise InputError(
                    path,
                    [Problem(f"line {number}", "is not a JSON object: give `terraform plan -json` output")],
                    "plan log",
                )
            messages.append(message)
    return RebootChecks.from_log(messages)


def context_for(site: Site, options: GuardOptions) -> GuardContext:
    states = {}
    for path in options.deployed_states:
        state = load_json(read_text(path, limit=options.limit, what="state"), path, what="state")
        if not isinstance(state, dict):
            raise InputError(
                path, [Problem("(top level)", "is not a state: give `terraform state pull` output")], "state"
            )
        states[path] = state
    usage = deployed_usage(states)
    usage.deployed_known = bool(states)  # without any deployed state, only the site's nodes are known (PG010)
    if not options.teardown:
        site_usage(site, usage)
    try:
        roles = site_roles(site, None if options.layer is None else layer_named(site, options.layer))
    except AmbiguousRoles as error:
        raise OperationError(str(error), ExitCode.BAD_INPUT) from None
    except KeyError as error:  # a layer the site has not: its roles would silently be none
        raise OperationError(f"--layer: {error.args[0]}", ExitCode.BAD_INPUT) from None
    return GuardContext(
        roles=roles,
        usage=usage,
        allow_reboot=options.allow_reboot,
        teardown=options.teardown,
        reboot_checks=read_plan_log(options.plan_log, options.limit) if options.plan_log else None,
    )


@dataclass(frozen=True)
class GuardReport:
    """The guard's verdict on one plan: every violation (a waived one too, marked), and the ok line when nothing
    refused; `input_error` when the plan, log, state or site could not be read (nothing was judged)."""

    plan: str
    violations: tuple[Violation, ...] = ()
    ok: str = ""
    input_error: InputError | None = None
    command: str = "plan-guard"

    @property
    def refused(self) -> list[Violation]:
        return refusals(list(self.violations))

    @property
    def exit_code(self) -> int:
        if self.input_error is not None:
            return ExitCode.BAD_INPUT
        return ExitCode.REFUSED if self.refused else ExitCode.OK

    def notes(self) -> list[str]:
        if self.input_error is not None:
            return [str(self.input_error)]
        refused = self.refused
        lines = [str(violation) for violation in self.violations]
        if refused:
            lines += [f"why {line}" for line in explain({v.code for v in refused})]
            lines.append(f"{self.plan}: refused, {len(refused)} problem{'s' if len(refused) != 1 else ''}")
        return lines

    def lines(self) -> list[str]:
        return [f"{self.plan}: ok — {self.ok}"] if self.exit_code == ExitCode.OK else []

    def body(self) -> Mapping[str, Any]:
        error = self.input_error
        return {
            "plan": self.plan,
            "result": {ExitCode.OK: "ok", ExitCode.REFUSED: "refused"}.get(ExitCode(self.exit_code), "bad input"),
            "exit_code": int(self.exit_code),
            "summary": self.ok or None,
            "violations": [
                {"code": v.code, "name": v.name, "message": v.message, "waived": v.waived} for v in self.violations
            ],
            "why": explain({v.code for v in self.refused}),
            "problems": [
                {"file": error.path, "field": p.field, "line": p.line, "message": p.message} for p in error.problems
            ]
            if error
            else [],
        }


def plan_guard_report(site: Site, options: GuardOptions) -> GuardReport:
    try:
        context = context_for(site, options)
        plan = load_plan_file(options.plan, options.limit)
        violations = check_plan(plan, context)
    except InputError as error:
        return GuardReport(options.plan, input_error=error)
    refused = refusals(violations)
    return GuardReport(options.plan, tuple(violations), "" if refused else ok_line(plan, context))


def plan_guard(site: Site, options: GuardOptions, err: TextIO, out: TextIO) -> int:
    from terravixens.output import render

    return render(plan_guard_report(site, options), False, out, err)


# ------------------------------------------------------------------------------------------------- command line
def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("plan", help="output of `terraform show -json PLANFILE` ('-' for standard input)")
    site_option(
        parser,
        "site file: roles, and what its nodes want from L0 (default: $TERRAVIXENS_SITE or sites/example.yaml)",
    )
    parser.add_argument("--layer", help="the layer the plan is of (platform-<cluster>): roles of that cluster only")
    allow_reboot_option(parser)
    parser.add_argument(
        "--plan-log",
        help="`terraform plan -json` output of the same plan (tells the guard which reboot checks could not run)",
    )
    parser.add_argument(
        "--deployed-state",
        action="append",
        default=[],
        metavar="STATE",
        help="a platform layer's `terraform state pull` (what its VMs use; repeatable)",
    )
    parser.add_argument(
        "--teardown",
        action="store_true",
        help="the plan is a `plan -destroy`: its deletions are the request (nodes leave), and "
        "what the site's nodes want from L0 does not count",
    )
    parser.add_argument("--max-size-mib", type=int, default=512, help="refuse larger plan files (default 512)")
    json_option(parser, " (terravixens/plan-guard/v1: the verdict and every violation)")


def command(args: argparse.Namespace, site: Site) -> int:
    options = GuardOptions(
        plan=args.plan,
        layer=args.layer,
        allow_reboot=frozenset(args.allow_reboot),
        plan_log=args.plan_log,
        deployed_states=tuple(args.deployed_state),
        teardown=args.teardown,
        limit=args.max_size_mib * 1024 * 1024,
    )
    return render(plan_guard_report(site, options), args.json)


PLAN_GUARD = Definition(
    arguments,
    command,
    codes(
        ExitCode.OK,
        (ExitCode.REFUSED, "the plan breaks a promise: one line per problem and why"),
        (
            ExitCode.BAD_INPUT,
            "not a plan (or a state, log or site that cannot be read, or --layer names no layer of the site)",
        ),
        ExitCode.INTERRUPTED,
    ),
    examples=(
        "terraform show -json plan.tfplan | terravixens plan-guard - --layer platform-prod",
        "terravixens plan-guard plan.json --layer platform-prod --allow-reboot cp-a --plan-log plan.log --json",
    ),
)


__all__ = ["PLAN_GUARD", "GuardOptions", "GuardReport", "arguments", "command", "plan_guard", "plan_guard_report"]
