"""AgentBench's OS interaction task: ``AgentBench-OS-v0`` (see :mod:`.env`)."""

from .env import OSEnv
from .sandbox import Sandbox, SandboxError, SandboxLimits
from .tasks import OSTask, load_tasks

__all__ = ["OSEnv", "OSTask", "Sandbox", "SandboxError", "SandboxLimits", "load_tasks"]
