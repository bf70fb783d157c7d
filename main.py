#!/usr/bin/env python
"""cdktf app entry point: synthesizes one stack per layer from the site file.

The site file is $TERRAVIXENS_SITE, or sites/example.yaml. Problems in it are printed as a list naming the file,
the field, the bad value and the fix, and synth stops with exit code 2; a broken safety rule stops it with 1.
"""

import sys

from terravixens.synth import one_synth_process, synth_main

if __name__ == "__main__":
    one_synth_process()
    sys.exit(synth_main())
