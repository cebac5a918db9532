"""The five AgentBench tasks as a ``verifiers`` taskset, by name:
``vf-eval agentgym-eppo-verifiers`` (``verifiers`` imports a taskset id as a top-level
module and takes its pieces from the module's ``__all__``). The classes and that list
live in :mod:`agentgym_eppo.adapters.verifiers`; see ``docs/verifiers.md``.
"""

from agentgym_eppo.adapters.verifiers import *  # noqa: F403 - its __all__, re-exported below
from agentgym_eppo.adapters.verifiers import __all__ as __all__
