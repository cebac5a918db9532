"""The five AgentBench tasks as a ``verifiers`` taskset, by name:
``vf-eval agentgym-eppo-verifiers`` (``verifiers`` imports a taskset id as a top-level
module). The classes live in :mod:`agentgym_eppo.adapters.verifiers`; see
``docs/verifiers.md``.
"""

from agentgym_eppo.adapters.verifiers import (
    AgentBenchData,
    AgentBenchEnv,
    AgentBenchEnvConfig,
    AgentBenchTask,
    AgentBenchTaskset,
    AgentBenchTasksetConfig,
    ToolCallHarness,
    ToolCallHarnessConfig,
)

__all__ = [
    "AgentBenchData",
    "AgentBenchEnv",
    "AgentBenchEnvConfig",
    "AgentBenchTask",
    "AgentBenchTaskset",
    "AgentBenchTasksetConfig",
    "ToolCallHarness",
    "ToolCallHarnessConfig",
]
