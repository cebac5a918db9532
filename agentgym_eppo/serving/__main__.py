"""``python -m agentgym_eppo.serving --task db``: the same as ``agentgym-eppo serve``."""

import sys

from .command import main

if __name__ == "__main__":  # importing this module (the doctest collector does) runs nothing
    sys.exit(main())
