"""`python3 -m terravixens.agent`: the node agent's command line (cli.py)."""

import sys

from terravixens.agent.cli import main

sys.exit(main())
