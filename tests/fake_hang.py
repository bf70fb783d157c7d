"""A stand-in for `terraform` or `kubectl` that hangs the way a stuck tool does, for the hang tests.

    FAKE_HANG_ON=init FAKE_HANG_DIR=DIR python fake_hang.py ARG...

When FAKE_HANG_ON occurs in its arguments (joined with spaces), it starts a child that inherits its stdout and
stderr (a plugin, a credential helper: only ending the whole process group closes the pipes), writes "PID CHILDPID"
to DIR/hung, prints a first line as Terraform's `-json` output would, and never returns. `version` answers as
`terraform version` does (the cdktf CLI asks it; cdktf's terraform_data element too). Anything else exits 0
without output. Tests write a wrapper named after the tool that execs this file.

What the real tools would add: Terraform answers SIGTERM by finishing what is in flight and writing its state
(the runner's grace covers that); kubectl stops at once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

arguments = " ".join(sys.argv[1:])
pattern = os.environ.get("FAKE_HANG_ON", "")
if pattern and pattern in arguments:
    child = subprocess.Popen(["sleep", "3600"])
    folder = Path(os.environ["FAKE_HANG_DIR"])
    with open(folder / "hung", "a") as hung:
        hung.write(f"{os.getpid()} {child.pid}\n")
    print('{"@level":"info","@message":"Terraform 1.11.4","type":"version"}', flush=True)
    while True:
        time.sleep(3600)
if sys.argv[1:] == ["version"]:
    print("Terraform v1.11.4\non linux_amd64")
sys.exit(0)
