"""The cdktf app (main.py): synthesize every layer of the site, or say why not without a traceback.

Exit codes (terravixens.exitcodes): OK synthesized; REFUSED a safety rule (TV001…) stopped synth, its messages
printed; BAD_INPUT the site file is wrong, every problem printed with file, field, value and fix.
"""

from __future__ import annotations

import atexit
import gc
import sys

from terravixens.exitcodes import ExitCode

# cdktf raises one RuntimeError for all error annotations; its text after this mark is the list of rule messages.
RULE_FAILURE_MARK = 'Encountered Annotations with level "ERROR"'
# cdktf's closing advice, to turn every error annotation off: never the way out of a safety rule, so not repeated.
BYPASS_ADVICE = "Either fix the issues above, or set the environment variable CDKTF_CONTINUE_SYNTH_ON_ERROR_ANNOTATIONS"


def rule_messages(error: BaseException) -> str | None:
    """The safety rules' messages when `error` is cdktf stopping synth on them; None for any other error.

    The one place that reads cdktf's text: the app (synth_main) and the operations (Workspace.synth, review) say the
    same thing."""
    text = str(error)
    if RULE_FAILURE_MARK not in text:
        return None
    messages = text.split(RULE_FAILURE_MARK, 1)[1]
    return "\n".join(line for line in messages.strip(": \n").splitlines() if not line.startswith(BYPASS_ADVICE)).strip()


def synth_failure(error: BaseException) -> str:
    """cdktf's own message for a synth that failed for another reason than a rule (a validation cdktf runs, such as
    `terraform version` for terraform_data when no Terraform CLI is found), without the JavaScript stack."""
    lines = []
    for line in str(error).splitlines():
        if line.strip().startswith("at ") or "If you wish to ignore these validations" in line:
            break
        if line.strip():
            lines.append(line.rstrip())
    text = "\n".join(lines) or type(error).__name__
    if "Could not determine version of terraform" in text:
        text += (
            "\nsynth runs the Terraform CLI (cdktf checks its version): install Terraform >= 1.5 or set "
            "TERRAFORM_BINARY_NAME"
        )
    return text


def one_synth_process() -> None:
    """Set the collector for a process that runs one synth and exits (main.py calls it first, before the site model,
    cdktf or the bindings are imported).

    Such a process frees little of what it builds before it exits: the cyclic collector's passes while the library,
    cdktf and the bindings are imported and the stacks built (~160 at 3 + 100 nodes, one of them over every object)
    and its last pass at exit over every object left (~70,000) are pure cost (ADR 0057). So the collector is off for
    the process, and what is alive is frozen at exit, after jsii's runtime stopped (atexit runs last what is
    registered first), so that the interpreter's final collection skips it. The Python process' peak memory at 1,000
    nodes: +3 MiB. Never called by the library: a process that synthesizes again and again (the tests, the
    operations, a user's program) keeps its collector."""
    gc.disable()
    atexit.register(gc.freeze)


def synth_main(outdir: str | None = None) -> int:
    """Synthesize the site named by $TERRAVIXENS_SITE (default sites/example.yaml) into `outdir` (cdktf's default)."""
    from terravixens.config.loader import SiteError, load_site

    try:
        site = load_site()
    except SiteError as error:
        print(error, file=sys.stderr)
        return ExitCode.BAD_INPUT
    from terravixens.stacks import build_app

    try:
        build_app(site, outdir).synth()
    except RuntimeError as error:
        messages = rule_messages(error)
        if messages is None:
            raise
        print("terravixens: synth stopped by safety rules:\n" + messages, file=sys.stderr)
        return ExitCode.REFUSED
    return ExitCode.OK
