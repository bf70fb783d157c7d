"""The cdktf app (main.py): synthesize every layer of the site, or say why not without a traceback.

Exit codes: 0 synthesized; 1 a safety rule (TV001…) stopped synth, its messages printed; 2 the site file is wrong,
every problem printed with file, field, value and fix.
"""
from __future__ import annotations

import sys

from terravixens.config.loader import SiteError, load_site

# cdktf raises one RuntimeError for all error annotations; its text after this mark is the list of rule messages.
RULE_FAILURE_MARK = "Encountered Annotations with level \"ERROR\""


def synth_main(outdir: str | None = None) -> int:
    """Synthesize the site named by $TERRAVIXENS_SITE (default sites/example.yaml) into `outdir` (cdktf's default)."""
    try:
        site = load_site()
    except SiteError as error:
        print(error, file=sys.stderr)
        return 2
    from terravixens.stacks import build_app

    try:
        build_app(site, outdir).synth()
    except RuntimeError as error:
        text = str(error)
        if RULE_FAILURE_MARK not in text:
            raise
        print("terravixens: synth stopped by safety rules:\n" + text.split(RULE_FAILURE_MARK, 1)[1].strip(": \n"),
              file=sys.stderr)
        return 1
    return 0
