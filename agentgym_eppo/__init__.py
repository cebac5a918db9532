"""agentgym-eppo: AgentBench's agent tasks as Gymnasium text environments, and a
GRPO/RLOO trainer with the EPPO entropy-paced per-task clip range.

Importing the package registers the ``AgentBench-<Task>-v0`` ids with Gymnasium.
"""

from .registration import register_environments

__version__ = "0.1.0"

register_environments()

__all__ = ["__version__", "register_environments"]
