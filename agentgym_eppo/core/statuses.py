"""Episode statuses, with AgentBench's names so that its reports and ours line up."""

from __future__ import annotations

from enum import Enum


class Status(str, Enum):
    """How an episode stands; every ``info`` carries one as ``info["status"]``.

    The values are AgentBench's ``SampleStatus`` strings. Every status except
    ``RUNNING`` and ``COMPLETED`` is an abnormal end and earns the abort penalty.
    """

    RUNNING = "running"
    COMPLETED = "completed"
    TASK_LIMIT_REACHED = "task_limit_reached"
    AGENT_INVALID_ACTION = "agent_invalid_action"
    AGENT_VALIDATION_FAILED = "agent_validation_failed"
    AGENT_CONTEXT_LIMIT = "agent_context_limit"
    TASK_ERROR = "task_error"

    @property
    def is_abort(self) -> bool:
        """True for every way an episode can end other than completing it."""
        return self not in (Status.RUNNING, Status.COMPLETED)
