"""``python -m agentgym_eppo.serving --task db``: the same as ``agentgym-eppo serve``."""

import sys

from .command import main

sys.exit(main())
